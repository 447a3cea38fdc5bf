/**
 * A prepared face as the client draws it (media option video_render: client): the CPU renderer's
 * layout for the session's size (PreparedFace.clientFace, native face-render ClientFace) with its
 * texture encoded as a lossless WebP, which browsers decode to exactly the texels the server's
 * renderer samples. The encode runs on libuv's pool (sharp), never on the event loop.
 */
import sharp from 'sharp';
import type { AvatarClientFace } from '../realtime/avatar-output.js';
import type { PreparedFace } from './media-session.js';

/** WebP effort 0: about 60 ms for a 512x512 photo, 10–20 % larger than the slowest setting (lossless either way). */
const TEXTURE_EFFORT = 0;

export async function clientFaceOf(
  faceId: string,
  prepared: PreparedFace,
  size: { width: number; height: number; upsampleFactor: number },
): Promise<AvatarClientFace> {
  const f = prepared.clientFace(size.width, size.height, size.upsampleFactor);
  const raw = { width: f.textureWidth, height: f.textureHeight, channels: 3 } as const;
  const data = await sharp(f.texture, { raw }).webp({ lossless: true, effort: TEXTURE_EFFORT }).toBuffer();
  const { texture: _rgb, textureWidth, textureHeight, textureFactor, mouth, ...rest } = f;
  return {
    ...rest,
    faceId,
    texture: { width: textureWidth, height: textureHeight, factor: textureFactor, mimeType: 'image/webp', data },
    mouth: { ...mouth, photo: mouth.photo ?? undefined },
  };
}
