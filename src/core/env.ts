/**
 * Reading settings from the environment: shared by src/config.ts and the provider config modules,
 * so that every variable is parsed and refused the same way (ConfigError naming the variable).
 */
import { ConfigError } from './errors.js';

export type Env = Record<string, string | undefined>;

/** An integer variable in [min, max]; empty or unset gives `fallback`. */
export function intVar(env: Env, name: string, fallback: number, min: number, max: number): number {
  const text = env[name]?.trim();
  if (!text) return fallback;
  if (!/^\d+$/.test(text)) throw new ConfigError(name, `expected an integer, got '${text}'`);
  const value = Number(text);
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}
