/**
 * Turns asset ids into what the media engine renders: a face id (standard or an uploaded face the
 * user owns) into a `FaceInput` (the photo framed for the output size + registered landmarks), a driving id into a
 * `MotionInput` (the template parsed off the event loop). Landmarks come from the FaceRegistry (cached on disk by image hash); decoded faces
 * and motions are kept in a small in-memory cache because every session of a face needs them.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { AssetService } from '../assets/asset-service.js';
import { LoadOnce } from '../core/load-once.js';
import type { AssetKind } from '../store/store.js';
import { faceInputFromImage } from './face-input.js';
import type { FaceRegistry } from './face-registration.js';
import { motionInputFromTemplate } from './motion-input.js';
import type { FaceInput, MotionInput } from './native.js';

/** Framed faces kept in memory (each 512x512 one is ~0.8 MB of RGB, 1280x720 ~2.8 MB). */
const MAX_CACHED_FACES = 16;
const MAX_CACHED_MOTIONS = 32;

export const DEFAULT_FACE_ID = 'default';
export const DEFAULT_DRIVING_ID = 'default';

export class AvatarAssets {
  private readonly faces = new LoadOnce<FaceInput>(MAX_CACHED_FACES);
  private readonly motions = new LoadOnce<MotionInput>(MAX_CACHED_MOTIONS);

  constructor(
    private readonly assets: AssetService,
    private readonly registry: FaceRegistry,
    private readonly dataDir: string,
  ) {}

  /**
   * The face to render, framed head and shoulders for a `width` x `height` output (framing.ts);
   * throws the asset service's 404 for an id the user cannot use.
   */
  face(faceId: string, userId: string, width: number, height: number): Promise<FaceInput> {
    return this.faces.get(`${userId}\0${faceId}\0${width}x${height}`, async () => {
      const image = await this.file('face', faceId, userId);
      const landmarks = await this.registry.register(image);
      return faceInputFromImage(image, landmarks, { width, height });
    });
  }

  motion(drivingId: string, userId: string): Promise<MotionInput> {
    return this.motions.get(`${userId}\0${drivingId}`, async () =>
      motionInputFromTemplate(await this.assets.readMotion(await this.file('driving', drivingId, userId))),
    );
  }

  private async file(kind: AssetKind, id: string, userId: string): Promise<Buffer> {
    const entry = this.assets.standard.find(kind, id);
    if (entry) return fs.readFile(this.assets.standard.filePath(kind, entry));
    const record = await this.assets.get(kind, id, userId);
    return fs.readFile(path.join(this.dataDir, record.storagePath));
  }
}
