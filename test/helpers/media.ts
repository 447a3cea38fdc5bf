/** Media sessions for tests: the standard default face (with its cached landmarks) and idle motion. */
import fs from 'node:fs';
import path from 'node:path';
import { parseMotionTemplate } from '../../src/assets/motion-template.js';
import { faceInputFromImage } from '../../src/media/face-input.js';
import type { FaceLandmarks } from '../../src/media/face-registration.js';
import type { MediaSessionConfig } from '../../src/media/media-session.js';
import { motionInputFromTemplate } from '../../src/media/motion-input.js';
import { REPO_ROOT } from '../../harness/servers/server.js';

/** A 512x512 @ 25 fps session config of the default face and the idle motion, seed 7. */
export async function standardMediaConfig(outputs: MediaSessionConfig['outputs'], pacing: MediaSessionConfig['pacing'] = 'manual'): Promise<MediaSessionConfig> {
  const landmarks = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'test/fixtures/faces/default.landmarks.json'), 'utf8')) as FaceLandmarks;
  const face = await faceInputFromImage(fs.readFileSync(path.join(REPO_ROOT, 'models/assets/faces/default.jpg')), landmarks);
  const motion = motionInputFromTemplate(parseMotionTemplate(fs.readFileSync(path.join(REPO_ROOT, 'models/assets/driving/idle.pkl'))));
  return { width: 512, height: 512, fps: 25, outputs, pacing, pipelinesDir: path.join(REPO_ROOT, 'pipelines'), seed: 7, face, motion };
}
