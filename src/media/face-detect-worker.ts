/**
 * Worker thread entry (core/off-thread.ts) for face registration: runs @vladmandic/human (BlazeFace,
 * FaceMesh, Iris on the TensorFlow.js WebAssembly backend) on a decoded photo, so the 60-400 ms of
 * wasm work per photo (and the model load) never block the event loop. The models load once per
 * worker; detections run one at a time. Returns only what registration reads of each face.
 *
 * The wasm backend also installs process-level handlers that rethrow uncaught exceptions: here they
 * can end this worker (the registry starts a new one), never the server.
 */
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Config, Human } from '@vladmandic/human';
import { serveJobs } from '../core/off-thread.js';
import { locateHuman } from './human-package.js';
import type { DetectRequest, DetectedFace } from './face-registration.js';

/** Detector candidates kept before our own score rule; low so that a weak face is reported as
 * "not confident" rather than as "no face". */
const DETECTOR_MIN_CONFIDENCE = 0.2;
/** Faces considered per photo; the largest is registered. */
const MAX_FACES = 10;

const require = createRequire(import.meta.url);

const HUMAN_CONFIG: Partial<Config> = {
  backend: 'wasm',
  debug: false,
  async: false,
  warmup: 'none',
  // Every photo is independent: no reuse of boxes or results from a previous call.
  cacheSensitivity: 0,
  filter: { enabled: false },
  face: {
    enabled: true,
    detector: {
      rotation: false,
      maxDetected: MAX_FACES,
      minConfidence: DETECTOR_MIN_CONFIDENCE,
      skipFrames: 0,
      skipTime: 0,
      return: false,
    },
    mesh: { enabled: true },
    iris: { enabled: true },
    attention: { enabled: false },
    emotion: { enabled: false },
    description: { enabled: false },
    antispoof: { enabled: false },
    liveness: { enabled: false },
    gear: { enabled: false },
  },
  body: { enabled: false },
  hand: { enabled: false },
  object: { enabled: false },
  gesture: { enabled: false },
  segmentation: { enabled: false },
};

let humanPromise: Promise<Human> | null = null;

/** Runs the face models on a decoded image at its detector size. */
async function detect(image: DetectRequest): Promise<DetectedFace[]> {
  const human = await loadHuman();
  const { tf } = human;
  const pixels = new Uint8Array(image.rgb.buffer, image.rgb.byteOffset, image.rgb.byteLength);
  const decoded = tf.tensor3d(pixels, [image.decodedHeight, image.decodedWidth, 3], 'int32');
  // Half-pixel centres: detector pixel centre (i + 0.5) maps to source (i + 0.5) / scale, so
  // continuous coordinates scale by the plain ratio, which is what toLandmarks() assumes.
  const input =
    image.decodedWidth === image.detectWidth && image.decodedHeight === image.detectHeight
      ? decoded
      : tf.image.resizeBilinear(decoded, [image.detectHeight, image.detectWidth], false, true);
  try {
    const result = await human.detect(input);
    if (result.error) throw new Error(`face detection failed: ${result.error}`);
    return result.face.map((f) => ({ mesh: f.mesh, size: f.size, box: f.box, score: f.score, angle: f.rotation?.angle ?? null }));
  } finally {
    tf.dispose([decoded, input]);
  }
}

function loadHuman(): Promise<Human> {
  if (!humanPromise) {
    humanPromise = createHuman();
    // A failed load is retried by the next call rather than cached forever.
    humanPromise.catch(() => {
      humanPromise = null;
    });
  }
  return humanPromise;
}

async function createHuman(): Promise<Human> {
  const { root } = locateHuman();
  const { Human: HumanClass } = require(path.join(root, 'dist/human.node-wasm.js')) as {
    Human: new (config: Partial<Config>) => Human;
  };
  const wasmDir = path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm'));
  const human = new HumanClass({
    ...HUMAN_CONFIG,
    // A local directory: the wasm backend then reads the .wasm files with fs, not fetch.
    wasmPath: wasmDir + path.sep,
    wasmPlatformFetch: false,
    modelBasePath: pathToFileURL(path.join(root, 'models') + path.sep).href,
  });
  await withFileFetch(() => human.load());
  const loaded = human.models.loaded();
  for (const name of ['blazeface', 'facemesh', 'iris']) {
    if (!loaded.includes(name)) throw new Error(`face model '${name}' did not load (loaded: ${loaded.join(', ') || 'none'})`);
  }
  return human;
}

/**
 * Node's fetch cannot read file:// URLs and tfjs loads models with fetch, so while `fn` runs,
 * file:// URLs and absolute paths are served from disk; everything else goes to the real fetch.
 * The original is restored afterwards (unless someone else replaced fetch in the meantime).
 */
async function withFileFetch<T>(fn: () => Promise<T>): Promise<T> {
  const realFetch = globalThis.fetch;
  const shim: typeof fetch = async (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (url.startsWith('file://') || path.isAbsolute(url)) {
      const file = url.startsWith('file://') ? fileURLToPath(url) : url;
      try {
        return new Response(await fs.readFile(file), { status: 200 });
      } catch (err) {
        return new Response(String((err as Error).message), { status: 404, statusText: 'Not Found' });
      }
    }
    return realFetch(input, init);
  };
  globalThis.fetch = shim;
  try {
    return await fn();
  } finally {
    if (globalThis.fetch === shim) globalThis.fetch = realFetch;
  }
}

serveJobs({ detect });
