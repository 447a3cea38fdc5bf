/**
 * The committed realtime event description (docs/realtime-events.schema.json and
 * docs/realtime-asyncapi.json) is what `npm run docs:events` generates from the current types:
 * the generator runs in this process and its output must equal the files byte for byte, so a type
 * changed without regenerating fails here. Also checks the generator fails loudly rather than
 * writing a partial description: every event type of the unions appears.
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ASYNCAPI_FILE, SCHEMA_FILE, buildEventDocuments } from '../../src/cli/realtime-schema.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
/** Generated once (the compiler takes seconds over the openai package's types). */
const docs = buildEventDocuments();

/** Where two texts first differ, as `line N: "committed" vs "fresh"`. */
function firstDifference(committed: string, fresh: string): string {
  const a = committed.split('\n');
  const b = fresh.split('\n');
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) return `line ${i + 1}: ${JSON.stringify(a[i] ?? '<end>')} vs ${JSON.stringify(b[i] ?? '<end>')}`;
  }
  return 'same lines, different bytes';
}

test('the committed realtime event description is what npm run docs:events generates', () => {
  for (const [file, fresh] of [[SCHEMA_FILE, docs.schema], [ASYNCAPI_FILE, docs.asyncapi]] as const) {
    const committed = fs.readFileSync(path.join(ROOT, file), 'utf8');
    if (committed !== fresh) assert.unreachable(`${file} is out of date (${firstDifference(committed, fresh)}): run \`npm run docs:events\` and commit the regenerated files`);
  }
});

test('every event type of the unions is described, once, in both documents', () => {
  const schema = JSON.parse(docs.schema) as { $defs: Record<string, unknown> };
  const asyncapi = JSON.parse(docs.asyncapi) as { components: { messages: Record<string, unknown> } };
  // The unions as the sources spell them: each `type: '...'` literal of the avatar's own events and the client tables.
  for (const type of ['session.created', 'error', 'response.output_image.delta', 'output_audio_buffer.committed', 'conversation.item.retrieved', 'session.update', 'output_audio_buffer.append', 'avatar.listen', 'response.cancel']) {
    assert.ok(type in schema.$defs, `${type} has a $defs entry`);
    assert.ok(type in asyncapi.components.messages, `${type} has an AsyncAPI message`);
  }
  assert.is(new Set([...docs.serverTypes, ...docs.clientTypes]).size, docs.serverTypes.length + docs.clientTypes.length);
  assert.equal(Object.keys(asyncapi.components.messages).sort(), [...docs.serverTypes, ...docs.clientTypes].sort());
});

/** Every `$ref` string in a JSON document. */
function refsOf(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const v of node) refsOf(v, out);
  else if (node !== null && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else refsOf(v, out);
    }
  }
  return out;
}

/** The value at a JSON pointer (`/a/b`), or undefined. */
function at(doc: unknown, pointer: string): unknown {
  return pointer
    .split('/')
    .slice(1)
    .map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce<unknown>((node, key) => (node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined), doc);
}

test('every $ref of both documents resolves (the AsyncAPI payloads into the schema file beside it)', () => {
  const schema = JSON.parse(docs.schema) as unknown;
  const asyncapi = JSON.parse(docs.asyncapi) as unknown;
  const files: Record<string, unknown> = { [path.basename(SCHEMA_FILE)]: schema };
  const unresolved: string[] = [];
  for (const [doc, name] of [[schema, 'schema'], [asyncapi, 'asyncapi']] as const) {
    const refs = refsOf(doc);
    assert.ok(refs.length > 50, `${name} has $refs`);
    for (const ref of refs) {
      const [file, pointer = ''] = ref.split('#');
      const target = file ? files[file] : doc;
      if (target === undefined || at(target, pointer) === undefined) unresolved.push(`${name}: ${ref}`);
    }
  }
  assert.equal(unresolved, []);
  // The check itself finds a dangling reference.
  assert.is(at(schema, '/$defs/no.such.event'), undefined);
});

test.run();
