/**
 * Builds the playground page (playground/: index.html, app.css and the TypeScript in src/) into
 * target/playground/, which the server serves at `/` (src/server/playground.ts). esbuild bundles
 * the browser code into one ES module, and the face renderer into another (face.js, for pages of
 * their own); nothing is fetched at run time. Run by setup.sh, so
 * `npm start` and `npm test` always serve the current page.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { PLAYGROUND_DIR } from '../server/playground.js';

export const PLAYGROUND_SOURCE_DIR = path.resolve(import.meta.dirname, '../../playground');

export async function buildPlayground(outDir: string = PLAYGROUND_DIR): Promise<void> {
  fs.mkdirSync(outDir, { recursive: true });
  // The page, and the face renderer alone for pages of their own (/playground/face.js).
  const bundles = [
    ['src/main.ts', 'app.js'],
    ['src/face-embed.ts', 'face.js'],
  ] as const;
  await Promise.all(
    bundles.map(([entry, out]) =>
      build({
        entryPoints: [path.join(PLAYGROUND_SOURCE_DIR, entry)],
        bundle: true,
        format: 'esm',
        target: ['chrome110', 'firefox115', 'safari16'],
        minify: true,
        sourcemap: 'linked',
        outfile: path.join(outDir, out),
        logLevel: 'warning',
      }),
    ),
  );
  for (const file of ['index.html', 'app.css']) fs.copyFileSync(path.join(PLAYGROUND_SOURCE_DIR, file), path.join(outDir, file));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  buildPlayground().then(
    () => console.log(`playground: built ${path.relative(process.cwd(), PLAYGROUND_DIR)}`),
    (err: unknown) => {
      console.error(`playground: ${err instanceof Error ? err.message : String(err)}`);
      process.exitCode = 1;
    },
  );
}
