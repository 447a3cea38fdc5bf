/**
 * The faces the endpoint benchmark's lip-sync turns are measured on: the two standard faces by
 * their ids, and two photos uploaded through the REST asset upload (POST /v1/faces, raw image
 * body; the session names an upload by the id it answers with, in session.update's `face`).
 *
 * No other licensed portrait is kept offline here than the two public-domain standard ones, so the
 * uploads are made from them, changed the ways a real upload differs from a standard face: the
 * smiling one (default.jpg, Eileen Collins) mirrored and cut off-centre (372x512 from x=140, as
 * test/media/lip-sync.test.ts does), the neutral one (face1.jpg, Grace Hopper) at another size
 * (640 px) and turned UPLOAD_TURN_DEG. Their labels say what they are made from.
 */
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import type { EndpointTarget } from '../../../harness/clients/realtime-session.js';
import { baseOf } from '../../../harness/clients/realtime-session.js';

/** A face to measure on: a standard id, or a photo to upload first. */
export interface LipFace {
  label: string;
  /** The standard face's id; null for an upload. */
  id: string | null;
  /** The photo to upload (JPEG); null for a standard face. */
  upload: Buffer | null;
}

const FACES_DIR = path.resolve(import.meta.dirname, '../../../models/assets/faces');
/** The smiling upload's cut: 372x512 from x=140 of the mirrored 512x512 photo. */
export const OFF_CENTRE = { left: 140, top: 0, width: 372, height: 512 };
/** The neutral upload's side before it is turned, px, and the turn, degrees clockwise. */
export const UPLOAD_SIDE_PX = 640;
export const UPLOAD_TURN_DEG = 4;
const UPLOAD_TIMEOUT_MS = 30_000;

const photo = (name: string) => fs.readFileSync(path.join(FACES_DIR, `${name}.jpg`));

/** The smiling upload: default.jpg mirrored, then cut off-centre (OFF_CENTRE). */
export function smilingUpload(original = photo('default')): Promise<Buffer> {
  return sharp(original).flop().extract(OFF_CENTRE).jpeg({ quality: 95 }).toBuffer();
}

/** The neutral upload: face1.jpg scaled to UPLOAD_SIDE_PX and turned UPLOAD_TURN_DEG (the corners filled grey). */
export function neutralUpload(original = photo('face1')): Promise<Buffer> {
  return sharp(original)
    .resize(UPLOAD_SIDE_PX, UPLOAD_SIDE_PX)
    .rotate(UPLOAD_TURN_DEG, { background: { r: 128, g: 128, b: 128 } })
    .jpeg({ quality: 92 })
    .toBuffer();
}

/** The four faces, in the order they are measured. */
export async function lipFaces(): Promise<LipFace[]> {
  return [
    { label: 'standard: default (Eileen Collins, smiling)', id: 'default', upload: null },
    { label: 'standard: face1 (Grace Hopper, neutral)', id: 'face1', upload: null },
    { label: `upload: smiling (default.jpg mirrored, off-centre ${OFF_CENTRE.width}x${OFF_CENTRE.height})`, id: null, upload: await smilingUpload() },
    { label: `upload: neutral (face1.jpg at ${UPLOAD_SIDE_PX} px, turned ${UPLOAD_TURN_DEG}°)`, id: null, upload: await neutralUpload() },
  ];
}

/** A face ready to be named in a session: its id (the standard one's, or what its upload answered), or why it has none. */
export interface ShownFace {
  label: string;
  id: string | null;
  missing: string | null;
}

/**
 * What a lip-sync turn asks, by round: each round a reply of a few phrases on another subject, so
 * that a face's turns pool different sentences (their first sounds and pauses) and not one reply
 * again. None asks for a reply that starts on a bilabial, whose lips close before the sound (the
 * onsets leave those out).
 */
export const LIP_SYNC_QUESTIONS = ['Tell me about the sea in two sentences.', 'Tell me about rain in two sentences.', 'Tell me about the night sky in two sentences.'] as const;
/**
 * The most tokens a WebSocket lip-sync reply may have (response.max_output_tokens): a small model
 * does not keep to "two sentences" (rain: 16 s of speech; the night sky: over the 90 s a reply is
 * waited for), and a few phrases are what the figures need. A WebRTC turn is cancelled after a
 * few seconds instead.
 */
export const LIP_SYNC_MAX_TOKENS = 40;

/** One lip-sync turn: a face and what is asked. */
export interface LipTurn extends ShownFace {
  question: string;
}

/** `rounds` rounds of the faces in turn, round k asking LIP_SYNC_QUESTIONS[k] (cycling). */
export function lipTurns(faces: ShownFace[], rounds: number): LipTurn[] {
  return Array.from({ length: rounds }, (_, k) => faces.map((face) => ({ ...face, question: LIP_SYNC_QUESTIONS[k % LIP_SYNC_QUESTIONS.length]! }))).flat();
}

/**
 * The four faces with the ids a session names them by, the uploads sent first (named
 * `${prefix}-<index>`), so that every transport measures the same uploads; a photo the target
 * refuses carries why, and is not measured.
 */
export async function showFaces(target: EndpointTarget, prefix = 'endpoint-bench'): Promise<ShownFace[]> {
  const out: ShownFace[] = [];
  for (const [i, face] of (await lipFaces()).entries()) {
    if (!face.upload) {
      out.push({ label: face.label, id: face.id, missing: null });
      continue;
    }
    try {
      out.push({ label: face.label, id: await uploadFace(target, face.upload, `${prefix}-${i}`), missing: null });
    } catch (err) {
      out.push({ label: face.label, id: null, missing: `not uploaded: ${(err as Error).message.slice(0, 200)}` });
    }
  }
  return out;
}

/** Uploads a face photo (POST /v1/faces?name=…, the JPEG as the body); its id, or a plain error. */
export async function uploadFace(target: EndpointTarget, jpeg: Buffer, name: string): Promise<string> {
  const url = `${baseOf(target.url).replace(/^ws/i, 'http')}/v1/faces?name=${encodeURIComponent(name)}`;
  const res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${target.key}`, 'content-type': 'image/jpeg' }, body: jpeg, signal: AbortSignal.timeout(UPLOAD_TIMEOUT_MS) });
  const body = (await res.json().catch(() => ({}))) as { id?: string; face_id?: string; error?: { code?: string; message?: string } };
  const id = body.face_id ?? body.id;
  if (!res.ok || !id) throw new Error(`POST /v1/faces answered ${res.status}${body.error ? ` (${body.error.code ?? ''}: ${body.error.message ?? ''})` : ''}`);
  return id;
}
