/**
 * `npm run docs:events`: the realtime events (WebSocket `/v1/realtime` and a call's data channel
 * carry the same JSON) as machine-readable files, generated from the server's own TypeScript types:
 *
 *   docs/realtime-events.schema.json  JSON Schema 2020-12: one `$defs` entry per event type, and
 *                                     `ServerEvent` / `ClientEvent` as a `oneOf` on `type`
 *   docs/realtime-asyncapi.json       AsyncAPI 3.0 around it: the two channels, what the server
 *                                     sends and receives, one message per event type
 *
 * The sources are src/realtime/server-events.ts (`ServerEvent`) and src/realtime/client-events.ts
 * (`TypedClientEvent`, `TypedAvatarClientEvent`), read with the TypeScript compiler: this script
 * parses those files, it imports nothing of realtime/, and nothing the server loads imports it
 * (a dev-only tool; test/cli/realtime-schema.test.ts checks the committed files are its
 * output byte for byte).
 *
 * Rules of the translation (the types are objects of scalars, literals, arrays and loosened
 * `object` records, by design):
 *  - server events are exact: every object the types name gets `additionalProperties: false`, so
 *    a field the server sends that its type lacks fails the schema test;
 *  - client events are open (the server ignores fields it does not read), and a field the checked
 *    event holds as `null` when the client left it out (`event_id`, `previous_item_id`, ...) is
 *    optional on the wire;
 *  - several server types that share one `type` (a realtime and an avatar-only form) become one
 *    `$defs` entry with an `anyOf` of the forms, each titled by its TypeScript name;
 *  - doc comments become `description`s; the JSDoc tags `@minLength`, `@maxLength`,
 *    `@minItems`, `@maxItems`, `@minimum`, `@maximum` and `@pattern` become those keywords.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SERVER_EVENTS = path.join(ROOT, 'src/realtime/server-events.ts');
const CLIENT_EVENTS = path.join(ROOT, 'src/realtime/client-events.ts');
export const SCHEMA_FILE = 'docs/realtime-events.schema.json';
export const ASYNCAPI_FILE = 'docs/realtime-asyncapi.json';
const SCHEMA_ID = 'urn:avatar-realtime-server:realtime-events';
/** Nested records deeper than this are a sign of a recursive type, which the events do not have. */
const MAX_DEPTH = 12;
const NUMERIC_TAGS = new Set(['minLength', 'maxLength', 'minimum', 'maximum', 'minItems', 'maxItems']);

type Schema = { [key: string]: unknown };
type Side = 'server' | 'client';

/** One member of an event union: its `type`, its schema, and the TypeScript name it came from. */
interface EventForm {
  type: string;
  schema: Schema;
  title: string | null;
}

class Walker {
  constructor(
    private readonly checker: ts.TypeChecker,
    private readonly side: Side,
  ) {}

  /** The schema of one event type (an object with a literal `type`). */
  event(t: ts.Type, description: string): EventForm {
    const origin = this.origin(t);
    const schema = this.object(t, 0, origin);
    const typeSchema = (schema.properties as Record<string, Schema> | undefined)?.type;
    if (typeSchema === undefined || typeof typeSchema.const !== 'string') throw new Error(`an event without a literal type: ${this.checker.typeToString(t)}`);
    const text = description || (origin?.symbol ? this.doc(origin.symbol) : '');
    const title = origin?.symbol?.name ?? null;
    return { type: typeSchema.const, schema: { ...(title ? { title } : {}), ...(text ? { description: text } : {}), ...schema }, title };
  }

  /** The interface a loosened or trimmed type was made from (`Built<E>`, `Omit<E>`, `Plain<E>`, ...), for its docs. */
  private origin(t: ts.Type): ts.Type | null {
    if (t.aliasSymbol && t.aliasTypeArguments?.length && ['Built', 'Omit', 'Plain', 'Carrying'].includes(t.aliasSymbol.name)) {
      return this.origin(t.aliasTypeArguments[0]!);
    }
    if (t.isIntersection()) {
      for (const part of t.types) {
        const o = this.origin(part);
        if (o) return o;
      }
      return null;
    }
    const flags = t.symbol?.flags ?? 0;
    return flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.Class) ? t : null;
  }

  private doc(symbol: ts.Symbol): string {
    return ts.displayPartsToString(symbol.getDocumentationComment(this.checker)).trim();
  }

  private schemaOf(t: ts.Type, depth: number): Schema {
    if (depth > MAX_DEPTH) throw new Error(`types nest deeper than ${MAX_DEPTH}: ${this.checker.typeToString(t)}`);
    const f = t.flags;
    if (f & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return {};
    if (f & ts.TypeFlags.String) return { type: 'string' };
    if (f & ts.TypeFlags.Number) return { type: 'number' };
    if (f & ts.TypeFlags.Null) return { type: 'null' };
    if (f & ts.TypeFlags.Boolean) return { type: 'boolean' };
    if (t.isStringLiteral() || t.isNumberLiteral()) return { const: t.value };
    if (f & ts.TypeFlags.BooleanLiteral) return { const: this.checker.typeToString(t) === 'true' };
    if (f & ts.TypeFlags.NonPrimitive) return { type: 'object' };
    if (t.isUnion()) return this.union(t.types, depth);
    if (this.checker.isArrayType(t)) return { type: 'array', items: this.schemaOf(this.checker.getTypeArguments(t as ts.TypeReference)[0]!, depth + 1) };
    if (f & ts.TypeFlags.Object || t.isIntersection()) return this.object(t, depth, null);
    throw new Error(`no JSON Schema for the type ${this.checker.typeToString(t)}`);
  }

  private union(members: readonly ts.Type[], depth: number): Schema {
    let parts = members.filter((m) => !(m.flags & (ts.TypeFlags.Undefined | ts.TypeFlags.Void)));
    const isBool = (m: ts.Type) => (m.flags & ts.TypeFlags.BooleanLiteral) !== 0;
    const bools = parts.filter(isBool);
    const hasBoolean = bools.length === 2;
    if (hasBoolean) parts = parts.filter((m) => !isBool(m));
    const nullable = parts.some((m) => m.flags & ts.TypeFlags.Null);
    parts = parts.filter((m) => !(m.flags & ts.TypeFlags.Null));
    const schemas: Schema[] = parts.map((m) => this.schemaOf(m, depth));
    if (hasBoolean) schemas.push({ type: 'boolean' });
    // A union of literals is an enum; anything else an anyOf, with null folded into each when it is the only other member.
    if (schemas.length > 1 && schemas.every((s) => 'const' in s && typeof s.const === 'string')) {
      const values = schemas.map((s) => s.const);
      return nullable ? { enum: [...values, null] } : { type: 'string', enum: values };
    }
    if (nullable) schemas.push({ type: 'null' });
    if (schemas.length === 1) return schemas[0]!;
    if (schemas.every((s) => Object.keys(s).length === 1 && typeof s.type === 'string')) return { type: schemas.map((s) => s.type) };
    return { anyOf: schemas };
  }

  private object(t: ts.Type, depth: number, origin: ts.Type | null): Schema {
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    for (const prop of this.checker.getPropertiesOfType(t)) {
      const propType = this.checker.getTypeOfSymbol(prop);
      let schema = this.schemaOf(propType, depth + 1);
      const originProp = origin?.getProperty(prop.name);
      const text = this.doc(prop) || (originProp ? this.doc(originProp) : '');
      const tags = Object.fromEntries(
        [...prop.getJsDocTags(this.checker), ...(originProp?.getJsDocTags(this.checker) ?? [])].map((tag) => [tag.name, ts.displayPartsToString(tag.text).trim()]),
      );
      const keywords: Schema = {};
      for (const [name, value] of Object.entries(tags)) {
        if (NUMERIC_TAGS.has(name)) keywords[name] = Number(value);
        else if (name === 'pattern') keywords[name] = value;
      }
      schema = { ...(text ? { description: text } : {}), ...schema, ...keywords };
      properties[prop.name] = schema;
      const optional = (prop.flags & ts.SymbolFlags.Optional) !== 0;
      const nullOnAbsence = this.side === 'client' && propType.isUnion() && propType.types.some((m) => m.flags & ts.TypeFlags.Null);
      if (!optional && !nullOnAbsence) required.push(prop.name);
    }
    const out: Schema = { type: 'object' };
    if (Object.keys(properties).length > 0) out.properties = properties;
    if (required.length > 0) out.required = required;
    const index = this.checker.getIndexInfosOfType(t).find((i) => i.keyType.flags & ts.TypeFlags.String);
    if (index) {
      const values = this.schemaOf(index.type, depth + 1);
      if (Object.keys(values).length > 0) out.additionalProperties = values;
    } else if (this.side === 'server' && Object.keys(properties).length > 0) {
      out.additionalProperties = false;
    }
    return out;
  }
}

/** The compiled sources: the members of each union, with the checker to read them. */
function readUnions(): { checker: ts.TypeChecker; server: readonly ts.Type[]; client: { type: ts.Type; doc: string }[] } {
  const program = ts.createProgram([SERVER_EVENTS, CLIENT_EVENTS], {
    strict: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    skipLibCheck: true,
    noEmit: true,
    types: ['node'],
  });
  const checker = program.getTypeChecker();
  const exported = (file: string, name: string): ts.Type => {
    const source = program.getSourceFile(file);
    const moduleSymbol = source && checker.getSymbolAtLocation(source);
    const symbol = moduleSymbol && checker.getExportsOfModule(moduleSymbol).find((s) => s.name === name);
    if (!symbol) throw new Error(`${path.relative(ROOT, file)} exports no ${name}`);
    return checker.getDeclaredTypeOfSymbol(symbol);
  };
  const members = (t: ts.Type): readonly ts.Type[] => (t.isUnion() ? t.types : [t]);
  // A client event's description is its entry's doc comment in client-events.ts's Fields tables.
  const clientSource = program.getSourceFile(CLIENT_EVENTS)!;
  const fieldDocs = new Map<string, string>();
  for (const statement of clientSource.statements) {
    if (!ts.isInterfaceDeclaration(statement)) continue;
    for (const member of statement.members) {
      const symbol = member.name && checker.getSymbolAtLocation(member.name);
      const text = symbol ? ts.displayPartsToString(symbol.getDocumentationComment(checker)).trim() : '';
      const key = `${statement.name.text}:${symbol?.name}`;
      if (text) fieldDocs.set(key, text);
    }
  }
  const typeOf = (t: ts.Type): string => {
    const literal = t.getProperty('type') && checker.getTypeOfSymbol(t.getProperty('type')!);
    if (!literal?.isStringLiteral()) throw new Error(`a client event without a literal type: ${checker.typeToString(t)}`);
    return literal.value;
  };
  const client = [
    ...members(exported(CLIENT_EVENTS, 'TypedClientEvent')).map((t) => ({ type: t, doc: fieldDocs.get(`Fields:${typeOf(t)}`) ?? '' })),
    ...members(exported(CLIENT_EVENTS, 'TypedAvatarClientEvent')).map((t) => ({ type: t, doc: fieldDocs.get(`AvatarFields:${typeOf(t)}`) ?? '' })),
  ];
  return { checker, server: members(exported(SERVER_EVENTS, 'ServerEvent')), client };
}

/** One `$defs` entry per event type: the form itself, or an anyOf of the forms sharing the type. */
function defsOf(forms: EventForm[]): Map<string, Schema> {
  const byType = new Map<string, EventForm[]>();
  for (const form of forms) byType.set(form.type, [...(byType.get(form.type) ?? []), form]);
  const defs = new Map<string, Schema>();
  for (const type of [...byType.keys()].sort()) {
    const same = byType.get(type)!;
    // Identical forms (a client event of both kinds of session) are one; differing ones an anyOf.
    const distinct = [...new Map(same.map((f) => [JSON.stringify(f.schema), f])).values()].sort((a, b) => (a.title ?? '').localeCompare(b.title ?? ''));
    defs.set(type, distinct.length === 1 ? distinct[0]!.schema : { anyOf: distinct.map((f) => f.schema) });
  }
  return defs;
}

export interface EventDocuments {
  /** The JSON Schema's text, as written to SCHEMA_FILE. */
  schema: string;
  /** The AsyncAPI document's text, as written to ASYNCAPI_FILE. */
  asyncapi: string;
  serverTypes: string[];
  clientTypes: string[];
}

/** Both documents, built from the current sources. */
export function buildEventDocuments(): EventDocuments {
  const { checker, server, client } = readUnions();
  const serverWalker = new Walker(checker, 'server');
  const clientWalker = new Walker(checker, 'client');
  const serverDefs = defsOf(server.map((t) => serverWalker.event(t, '')));
  // A session.update of either kind of session carries a session object: one entry, described by the realtime table.
  const clientForms = client.map(({ type, doc }) => clientWalker.event(type, doc));
  const clientDefs = defsOf(clientForms.filter((f, i) => !clientForms.slice(0, i).some((g) => g.type === f.type)));
  for (const type of clientDefs.keys()) if (serverDefs.has(type)) throw new Error(`'${type}' names both a client and a server event`);
  const ref = (type: string) => ({ $ref: `#/$defs/${type}` });
  const schema = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $id: SCHEMA_ID,
    title: 'Realtime events',
    description:
      'The JSON events of /v1/realtime (WebSocket) and of a call\'s data channel, in the GA dialect. ' +
      'Generated by `npm run docs:events` from src/realtime/server-events.ts and src/realtime/client-events.ts; do not edit. ' +
      'The legacy dialect renames some server events (response.output_audio.delta → response.audio.delta, ' +
      'response.output_image.delta → response.video.delta, ...; src/realtime/protocol.ts) with the same fields.',
    oneOf: [{ $ref: '#/$defs/ServerEvent' }, { $ref: '#/$defs/ClientEvent' }],
    $defs: {
      ServerEvent: { description: 'Any event the server sends, by its `type`.', oneOf: [...serverDefs.keys()].map(ref) },
      ClientEvent: { description: 'Any event a client may send (realtime and avatar-only sessions), by its `type`.', oneOf: [...clientDefs.keys()].map(ref) },
      ...Object.fromEntries(serverDefs),
      ...Object.fromEntries(clientDefs),
    },
  };
  const serverTypes = [...serverDefs.keys()];
  const clientTypes = [...clientDefs.keys()];
  return {
    schema: `${JSON.stringify(schema, null, 2)}\n`,
    asyncapi: `${JSON.stringify(asyncApi(serverTypes, clientTypes), null, 2)}\n`,
    serverTypes,
    clientTypes,
  };
}

/** The AsyncAPI 3.0 document: both channels carry every message; payloads are the schema's $defs. */
function asyncApi(serverTypes: string[], clientTypes: string[]): Schema {
  const schemaFile = path.basename(SCHEMA_FILE);
  const message = (type: string, from: string) => ({
    name: type,
    title: type,
    summary: `${from} event \`${type}\``,
    contentType: 'application/json',
    payload: { schemaFormat: 'application/schema+json;version=draft-2020-12', schema: { $ref: `${schemaFile}#/$defs/${type}` } },
  });
  const all = [...serverTypes, ...clientTypes];
  const channelMessages = Object.fromEntries(all.map((t) => [t, { $ref: `#/components/messages/${t}` }]));
  const channels = {
    realtime: {
      address: '/v1/realtime',
      title: 'Realtime WebSocket',
      description:
        'A realtime or avatar-only session over a WebSocket: text frames of one JSON event each (an avatar-only session may send raw I420 frames as binary messages, see docs/avatar-mode.md).',
      messages: channelMessages,
      bindings: { ws: { bindingVersion: '0.1.0' } },
    },
    callDataChannel: {
      address: null,
      title: 'WebRTC data channel of a call',
      description:
        'The first data channel a client opens on a call (POST /v1/realtime/calls), whatever its label: the same JSON events as the WebSocket, one per message; audio and video travel as media tracks instead of delta events.',
      messages: channelMessages,
    },
  };
  const operations: Record<string, Schema> = {};
  for (const [channel, suffix] of [['realtime', ''], ['callDataChannel', 'OnCall']] as const) {
    operations[`sendServerEvents${suffix}`] = {
      action: 'send',
      summary: 'Events the server sends.',
      channel: { $ref: `#/channels/${channel}` },
      messages: serverTypes.map((t) => ({ $ref: `#/channels/${channel}/messages/${t}` })),
    };
    operations[`receiveClientEvents${suffix}`] = {
      action: 'receive',
      summary: 'Events the server receives from the client.',
      channel: { $ref: `#/channels/${channel}` },
      messages: clientTypes.map((t) => ({ $ref: `#/channels/${channel}/messages/${t}` })),
    };
  }
  return {
    asyncapi: '3.0.0',
    info: {
      title: 'Avatar realtime server: realtime events',
      version: '1.0.0',
      description: `Generated by \`npm run docs:events\`; do not edit. The payloads are the JSON Schema 2020-12 definitions of ${schemaFile}.`,
    },
    defaultContentType: 'application/json',
    channels,
    operations,
    components: {
      messages: Object.fromEntries([...serverTypes.map((t) => [t, message(t, 'Server')]), ...clientTypes.map((t) => [t, message(t, 'Client')])]),
    },
  };
}

function main(): void {
  const docs = buildEventDocuments();
  for (const [file, text] of [[SCHEMA_FILE, docs.schema], [ASYNCAPI_FILE, docs.asyncapi]] as const) {
    fs.writeFileSync(path.join(ROOT, file), text);
    console.log(`${file}: ${text.length} bytes`);
  }
  console.log(`${docs.serverTypes.length} server and ${docs.clientTypes.length} client event types`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) main();
