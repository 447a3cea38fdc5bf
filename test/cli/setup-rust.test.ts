/**
 * src/cli/setup-rust.sh (sourced by setup.sh): which Rust it uses or installs, run against fake
 * rustc, cargo, rustup, apt-get, apt-cache and curl on a PATH of their own and a HOME of its own,
 * so nothing is installed or uninstalled and no network is used. Each fake logs its arguments.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT, tempDir } from '../../harness/servers/server.js';

const run = promisify(execFile);
const SetupRust = suite('setup-rust.sh');

interface Machine {
  /** rustc/cargo version on PATH (not in ~/.cargo), or null for none. */
  systemRust?: string | null;
  /** Version in ~/.cargo/bin, or null for no ~/.cargo. */
  cargoHomeRust?: string | null;
  /** ~/.cargo/bin/rustup exists (its `toolchain install stable` gives 1.95.0). */
  rustup?: boolean;
  /** What `apt-cache policy rustc` names as Candidate. */
  aptCandidate?: string;
  /** Whether the fake curl can fetch the rustup installer. */
  network?: boolean;
}

interface Outcome {
  code: number;
  out: string;
  /** One line per fake command run: "name args". */
  calls: string[];
  /** The PATH the script left, and the rustc on it. */
  path: string;
  rustc: string;
  home: string;
}

/** A fake rustc + cargo of `version` in `dir`. */
function writeRust(dir: string, version: string): void {
  fs.mkdirSync(dir, { recursive: true });
  script(path.join(dir, 'rustc'), `echo "rustc ${version} (0123abcd 2026-01-01)"`);
  script(path.join(dir, 'cargo'), `echo "cargo ${version} (0123abcd 2026-01-01)"`);
}

function script(file: string, body: string): void {
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
}

async function runSetupRust(m: Machine): Promise<Outcome> {
  const root = tempDir('avatar-setup-rust-');
  const home = path.join(root, 'home');
  const bin = path.join(root, 'bin');
  const log = path.join(root, 'calls.log');
  fs.mkdirSync(home);
  fs.mkdirSync(bin);
  const logged = (name: string) => `echo "${name} $*" >> "${log}"`;
  if (m.systemRust) writeRust(bin, m.systemRust);
  if (m.cargoHomeRust) writeRust(path.join(home, '.cargo/bin'), m.cargoHomeRust);
  if (m.rustup) {
    fs.mkdirSync(path.join(home, '.cargo/bin'), { recursive: true });
    script(
      path.join(home, '.cargo/bin/rustup'),
      `${logged('rustup')}\nif [ "$1" = toolchain ]; then for t in rustc cargo; do printf '#!/bin/sh\\necho "%s 1.95.0 (x)"\\n' $t > "${home}/.cargo/bin/$t"; chmod +x "${home}/.cargo/bin/$t"; done; fi`,
    );
  }
  script(path.join(bin, 'sudo'), `${logged('sudo')}\nexec "$@"`);
  script(
    path.join(bin, 'apt-get'),
    `${logged('apt-get')}\ncase "$*" in *install*rustc*) printf '#!/bin/sh\\necho "rustc ${(m.aptCandidate ?? '').replace(/^\d+:/, '').replace(/[+~-].*/, '')} (debian)"\\n' > "${bin}/rustc"; printf '#!/bin/sh\\necho cargo\\n' > "${bin}/cargo"; chmod +x "${bin}/rustc" "${bin}/cargo";; esac`,
  );
  script(path.join(bin, 'apt-cache'), `${logged('apt-cache')}\nprintf 'rustc:\\n  Installed: (none)\\n  Candidate: %s\\n' "${m.aptCandidate ?? '(none)'}"`);
  // The rustup installer as curl would fetch it: it installs 1.95.0 into ~/.cargo/bin.
  const installer = `#!/bin/sh\necho "rustup-init $*" >> "${log}"\nmkdir -p "$HOME/.cargo/bin"\nfor t in rustc cargo; do printf '#!/bin/sh\\necho "%s 1.95.0 (x)"\\n' $t > "$HOME/.cargo/bin/$t"; chmod +x "$HOME/.cargo/bin/$t"; done`;
  fs.writeFileSync(path.join(root, 'installer.sh'), installer);
  script(path.join(bin, 'curl'), `${logged('curl')}\n${m.network ? `cat "${root}/installer.sh"` : 'echo "curl: (6) Could not resolve host: sh.rustup.rs" >&2; exit 6'}`);
  script(path.join(bin, 'wget'), `${logged('wget')}\nexit 4`);

  const cmd = `set -euo pipefail; source src/cli/setup-rust.sh; setup_rust; echo "PATH=$PATH"; echo "RUSTC=$(rustc --version)"`;
  let code = 0;
  let out = '';
  try {
    const r = await run('/bin/bash', ['-c', cmd], { cwd: REPO_ROOT, env: { HOME: home, PATH: `${bin}:/usr/bin:/bin`, LANG: 'C' } });
    out = r.stdout + r.stderr;
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    code = e.code;
    out = e.stdout + e.stderr;
  }
  const calls = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n') : [];
  fs.rmSync(root, { recursive: true, force: true });
  return { code, out, calls, path: /^PATH=(.*)$/m.exec(out)?.[1] ?? '', rustc: /^RUSTC=(.*)$/m.exec(out)?.[1] ?? '', home };
}

SetupRust('a new enough toolchain on PATH is used as it is: nothing installed, nothing said', async () => {
  const r = await runSetupRust({ systemRust: '1.95.0', aptCandidate: '1.99.0', network: true });
  assert.is(r.code, 0, r.out);
  assert.equal(r.calls, [], 'no apt, no curl');
  assert.match(r.rustc, 'rustc 1.95.0');
  assert.not.match(r.out, 'setup:');
});

SetupRust('~/.cargo/bin is put first on PATH, and its toolchain wins over an older one on PATH', async () => {
  const r = await runSetupRust({ systemRust: '1.63.0', cargoHomeRust: '1.92.0' });
  assert.is(r.code, 0, r.out);
  assert.ok(r.path.startsWith(`${r.home}/.cargo/bin:`), r.path);
  assert.match(r.rustc, 'rustc 1.92.0');
  assert.equal(r.calls, []);
});

SetupRust('no toolchain, the distribution too old (Debian 12: 1.63): rustup stable, minimal profile, into ~/.cargo', async () => {
  const r = await runSetupRust({ systemRust: null, aptCandidate: '1.63.0+dfsg1-2', network: true });
  assert.is(r.code, 0, r.out);
  assert.ok(r.calls.some((c) => c.startsWith('apt-get update')), 'apt asked first');
  assert.not.ok(r.calls.some((c) => c.startsWith('apt-get install')), 'the old rustc is not installed');
  const curl = r.calls.find((c) => c.startsWith('curl'));
  assert.ok(curl?.includes('https://sh.rustup.rs') && curl.includes('--proto =https'), curl);
  assert.ok(r.calls.includes('rustup-init -y --profile minimal --default-toolchain stable'), r.calls.join('\n'));
  assert.ok(r.path.startsWith(`${r.home}/.cargo/bin:`), r.path);
  assert.match(r.rustc, 'rustc 1.95.0');
  assert.match(r.out, 'needs Rust 1.92 or later (found: none)');
});

SetupRust("an old toolchain and a new enough distribution rustc: the distribution's rustc and cargo, no rustup", async () => {
  const r = await runSetupRust({ systemRust: '1.80.0', aptCandidate: '1:1.93.1+dfsg1-1', network: true });
  assert.is(r.code, 0, r.out);
  assert.ok(r.calls.some((c) => /^apt-get install .*rustc cargo/.test(c)), r.calls.join('\n'));
  assert.not.ok(r.calls.some((c) => c.startsWith('curl')));
  assert.match(r.rustc, 'rustc 1.93.1');
  assert.match(r.out, 'found: 1.80.0');
});

SetupRust('rustup with an old default toolchain: installs stable and makes it the default', async () => {
  const r = await runSetupRust({ cargoHomeRust: '1.85.0', rustup: true, aptCandidate: '1.63.0+dfsg1-2', network: true });
  assert.is(r.code, 0, r.out);
  assert.ok(r.calls.includes('rustup toolchain install stable --profile minimal'), r.calls.join('\n'));
  assert.ok(r.calls.includes('rustup default stable'), r.calls.join('\n'));
  assert.not.ok(r.calls.some((c) => c.startsWith('curl') || c.startsWith('apt-get')), 'neither apt nor the installer');
  assert.match(r.rustc, 'rustc 1.95.0');
});

SetupRust('no network and nothing new enough: fails, naming the version needed and the rustup command', async () => {
  const r = await runSetupRust({ systemRust: '1.80.0', aptCandidate: '1.63.0+dfsg1-2', network: false });
  assert.is(r.code, 1, r.out);
  assert.match(r.out, 'no Rust toolchain 1.92 or later (found: 1.80.0)');
  assert.match(r.out, "curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal");
  assert.is(r.rustc, '', 'setup stopped before going on');
});

SetupRust.run();
