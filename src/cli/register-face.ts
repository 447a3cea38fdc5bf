/**
 * Registers the face in one photo and prints the FaceLandmarks JSON (one landmark per line), or
 * writes it to a file. Always runs the model (a throwaway cache directory), so it is the way to
 * regenerate test/fixtures/faces/*.landmarks.json:
 *
 *   node --import tsx src/cli/register-face.ts <image> [out.json]
 *
 * Exits 2 with the message when the photo has no usable face or does not decode.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AppError } from '../core/errors.js';
import { FaceRegistry, type FaceLandmarks } from '../media/face-registration.js';

const USAGE = 'usage: node --import tsx src/cli/register-face.ts <image> [out.json]';

export async function runRegisterFaceCli(argv: string[], out: (text: string) => void): Promise<number> {
  const [image, target] = argv;
  if (!image || image === '-h' || image === '--help' || argv.length > 2) {
    out(USAGE);
    return image === '-h' || image === '--help' ? 0 : 2;
  }
  const cacheDir = await mkdtemp(path.join(os.tmpdir(), 'register-face-'));
  const registry = new FaceRegistry(cacheDir);
  try {
    const result = await registry.register(await readFile(image));
    const text = formatLandmarks(result);
    if (target) await writeFile(target, text);
    else out(text);
    return 0;
  } finally {
    await registry.close();
    await rm(cacheDir, { recursive: true, force: true });
  }
}

/** JSON with one landmark per line: readable, and diffs of regenerated fixtures stay small. */
export function formatLandmarks(result: FaceLandmarks): string {
  const { landmarks, ...rest } = result;
  const head = Object.entries(rest).map(([k, v]) => `  ${JSON.stringify(k)}: ${JSON.stringify(v)}`);
  const points = landmarks.map((p) => `    ${JSON.stringify(p)}`).join(',\n');
  return `{\n${head.join(',\n')},\n  "landmarks": [\n${points}\n  ]\n}\n`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runRegisterFaceCli(process.argv.slice(2), (text) => process.stdout.write(text.endsWith('\n') ? text : text + '\n')).then(
    (code) => process.exit(code),
    (err: unknown) => {
      if (err instanceof AppError || (err as { code?: string }).code === 'ENOENT') {
        process.stderr.write(`${(err as Error).message}\n`);
        process.exit(2);
      }
      throw err;
    },
  );
}
