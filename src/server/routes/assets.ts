/**
 * Assets: public standard lists (spec 4.3; a valid key adds the caller's uploads), uploads in the
 * older form (POST /faces, /voices) and under /v1 (plus driving motions), per-asset get/delete,
 * and each asset's file (`/content`).
 */
import fs from 'node:fs';
import type { AssetKind } from '../../store/store.js';
import type { AppRouter } from '../context.js';
import { principalOf } from '../middleware.js';
import type { Services } from '../services.js';
import { receiveUpload } from '../upload.js';
import { assetView } from '../views.js';
import type { RouteGuards } from './guards.js';

const KINDS: { kind: AssetKind; plural: 'faces' | 'voices' | 'driving' }[] = [
  { kind: 'face', plural: 'faces' },
  { kind: 'voice', plural: 'voices' },
  { kind: 'driving', plural: 'driving' },
];

export function assetRoutes(router: AppRouter, s: Services, g: RouteGuards): void {
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

    router.get(`/v1/${plural}/:id`, ...g.authed, async (ctx) => {
      ctx.body = assetView(await s.assets.get(kind, ctx.params.id ?? '', principalOf(ctx).userId));
    });
    router.delete(`/v1/${plural}/:id`, ...g.authed, async (ctx) => {
      const asset = await s.assets.delete(kind, ctx.params.id ?? '', principalOf(ctx).userId);
      ctx.body = { id: asset.id, object: kind, deleted: true };
    });
  }
}
