/**
 * Where @vladmandic/human is installed and which version: the registration cache keys its results
 * by it, and the detection worker loads the models from there. Reads only package.json.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);

interface HumanPackage {
  root: string;
  version: string;
}

let humanPackage: HumanPackage | null = null;

/** Human's `exports` map hides package.json and the node-wasm build, so resolve the main entry
 * (dist/human.node.js) and build paths from the package root. */
export function locateHuman(): HumanPackage {
  if (!humanPackage) {
    const root = path.resolve(path.dirname(require.resolve('@vladmandic/human')), '..');
    const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { name: string; version: string };
    if (pkg.name !== '@vladmandic/human') throw new Error(`unexpected package at ${root}: ${pkg.name}`);
    humanPackage = { root, version: pkg.version };
  }
  return humanPackage;
}

/** The library and models that produce registrations, e.g. 'human@3.3.6 facemesh+iris'. */
export function humanModelId(): string {
  return `human@${locateHuman().version} facemesh+iris`;
}
