/**
 * Assets: public standard lists (spec 4.3; a valid key adds the caller's uploads), uploads in the
 * older form (POST /faces, /voices) and under /v1 (plus driving motions), per-asset get (public
 * for a standard asset, described like an upload) and delete, and each asset's file (`/content`).
 */
import fs from 'node:fs';
import type Koa from 'koa';
import type { AssetKind } from '../../store/store.js';
import type { AppContext, AppRouter, AppState } from '../context.js';
import { principalOf } from '../middleware.js';
import type { Services } from '../services.js';
import { receiveUpload } from '../upload.js';
import { assetView, standardAssetView } from '../views.js';
import type { RouteGuards } from './guards.js';
import type { Static } from '@sinclair/typebox';
import type { AssetDeleted } from '../api/responses.js';

type Middleware = Koa.Middleware<AppState, AppContext>;

const KINDS: { kind: AssetKind; plural: 'faces' | 'voices' | 'driving' }[] = [
  { kind: 'face', plural: 'faces' },
  { kind: 'voice', plural: 'voices' },
  { kind: 'driving', plural: 'driving' },
];

export function assetRoutes(router: AppRouter, s: Services, g: RouteGuards): void {
  /** `g.optionalAuth` for a standard asset's id, `g.authed` for anything else. */
  const publicIfStandard = (kind: AssetKind): Middleware => (ctx, next) => {
    const stack = s.assets.standard.find(kind, ctx.params.id ?? '') ? g.optionalAuth : g.authed;
    const run = (i: number): Promise<unknown> => (i === stack.length ? next() : Promise.resolve(stack[i]!(ctx, () => run(i + 1))));
    return run(0);
  };

  for (const { kind, plural } of KINDS) {
    router.get(`/v1/${plural}`, ...g.optionalAuth, async (ctx) => {
      ctx.body = { [plural]: await s.assets.list(kind, ctx.state.principal?.userId ?? null) };
    });

    const upload = async (ctx: Parameters<Parameters<AppRouter['post']>[1]>[0]) => {
      const { userId } = principalOf(ctx);
      const file = await receiveUpload(ctx, s.config.maxUploadBytes);
      const asset = await s.assets.upload({ kind, userId, ...file });
      ctx.status = 201;
      ctx.body = assetView(asset);
    };
    router.post(`/v1/${plural}`, ...g.authed, upload);
    router.post(`/${plural}`, ...g.authed, upload);

    // The file itself: public for standard assets (the playground shows faces as pictures), the
    // owner's key for uploads.
    router.get(`/v1/${plural}/:id/content`, ...g.optionalAuth, async (ctx) => {
      const file = await s.assets.content(kind, ctx.params.id ?? '', ctx.state.principal?.userId ?? null);
      ctx.type = file.contentType;
      ctx.set('Cache-Control', 'private, max-age=300');
      ctx.set('Content-Disposition', `inline; filename="${file.filename.replace(/[^\w.-]/g, '_')}"`);
      ctx.body = fs.createReadStream(file.path);
    });

    // One asset: a standard one is public (like the lists and its file) and described as an
    // upload is (a face with its face box, pose and frame); an upload needs its owner's API key.
    router.get(`/v1/${plural}/:id`, publicIfStandard(kind), async (ctx) => {
      const standard = s.assets.describeStandard(kind, ctx.params.id ?? '');
      ctx.body = standard
        ? standardAssetView(await standard)
        : assetView(await s.assets.get(kind, ctx.params.id ?? '', principalOf(ctx).userId));
    });
    router.delete(`/v1/${plural}/:id`, ...g.authed, async (ctx) => {
      const asset = await s.assets.delete(kind, ctx.params.id ?? '', principalOf(ctx).userId);
      ctx.body = { id: asset.id, object: kind, deleted: true } satisfies Static<typeof AssetDeleted>;
    });
  }
}
