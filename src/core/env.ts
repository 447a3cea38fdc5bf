/**
 * The one reader of environment variables. A variable is a row (`EnvVar`): its name, its default
 * as docs/configuration.md shows it, its description, and the parser that turns its text into a value.
 * src/config.ts and the provider config modules declare their rows with envVar() and read them
 * with readVars(); CONFIG_VARS (the table in docs/configuration.md) is the list of those rows, so a default is
 * written once and every integer, boolean or choice is parsed and refused the same way: unset or
 * blank means the default text, surrounding spaces are ignored, and a bad value throws ConfigError
 * naming the variable.
 */
import { ConfigError } from './errors.js';

export type Env = Record<string, string | undefined>;

export interface EnvVar<T = unknown> {
  name: string;
  /** The text used when the variable is unset or blank ('' shows as "(unset)" in docs/configuration.md). */
  default: string;
  description: string;
  /** Turns the (trimmed) text into the value; throws ConfigError naming `name` when it cannot. */
  parse(text: string, name: string): T;
}

export type Parser<T> = EnvVar<T>['parse'];

export function envVar<T>(name: string, defaultText: string, description: string, parse: Parser<T>): EnvVar<T> {
  return { name, default: defaultText, description, parse };
}

/** One variable's value: its text (or the default text when unset or blank), parsed. */
export function readVar<T>(env: Env, v: EnvVar<T>): T {
  const text = env[v.name]?.trim() || v.default;
  return v.parse(text, v.name);
}

export type VarValues<R extends Record<string, EnvVar>> = { [K in keyof R]: R[K] extends EnvVar<infer T> ? T : never };

/** Every row of a table read at once, under the table's keys. */
export function readVars<R extends Record<string, EnvVar>>(env: Env, rows: R): VarValues<R> {
  const out: Record<string, unknown> = {};
  for (const [key, row] of Object.entries(rows)) out[key] = readVar(env, row);
  return out as VarValues<R>;
}

// Parsers ---------------------------------------------------------------------------------------

export const text: Parser<string> = (t) => t;

/** Empty means none. */
export const optionalText: Parser<string | null> = (t) => (t === '' ? null : t);

export function integer(min: number, max: number): Parser<number> {
  return (t, name) => {
    if (!/^-?\d+$/.test(t)) throw new ConfigError(name, `expected an integer, got '${t}'`);
    const value = Number(t);
    if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
    return value;
  };
}

export const boolean: Parser<boolean> = (t, name) => {
  if (t !== 'true' && t !== 'false') throw new ConfigError(name, `expected true or false, got '${t}'`);
  return t === 'true';
};

export function oneOf<T extends string>(...values: T[]): Parser<T> {
  return (t, name) => {
    if (!(values as string[]).includes(t)) {
      throw new ConfigError(name, `expected ${values.slice(0, -1).join(', ')} or ${values.at(-1)}, got '${t}'`);
    }
    return t as T;
  };
}

/** An http(s) URL, or null when empty. */
export const optionalHttpUrl: Parser<string | null> = (t, name) => {
  if (t === '') return null;
  let url: URL | null = null;
  try {
    url = new URL(t);
  } catch {
    // refused below
  }
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
    throw new ConfigError(name, `expected an http(s) URL, got '${t}'`);
  }
  return t;
};

/** An API base URL (`https://api.openai.com/v1`): an http(s) URL without trailing slashes, or null. */
export const optionalBaseUrl: Parser<string | null> = (t, name) => optionalHttpUrl(t, name)?.replace(/\/+$/, '') ?? null;
