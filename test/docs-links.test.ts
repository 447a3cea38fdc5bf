/**
 * The documentation's links as a test. The README is the first visit's page and every reference
 * text lives in docs/ by audience, so a moved section, a renamed heading or a file that went away
 * must not leave a dead link behind. Read: README.md, every docs/**\/*.md, and the other committed
 * READMEs (native/, native/media-core/, pipelines/, harness/, integrations/*\/), whose links into
 * docs/ are how the plugins' readers find the protocol.
 *
 * Invariants checked:
 *  - every relative link and image (`[text](target)`, `![alt](target)`, `[ref]: target`,
 *    `<img src="target">`) names a file or folder that exists inside the repository;
 *  - every `#anchor` (alone, or after a path) is a heading of the target page, slugged the way
 *    GitHub does (pinned below with two real headings);
 *  - every page under docs/ is reachable from README.md by following links;
 *  - README.md stays short (a few screens).
 * Fenced code blocks and inline code are not scanned: a link written as an example is not a link.
 * The self-check feeds a made-up page with a broken file link, a broken anchor and a fenced fake
 * link through the same checker, so a checker that stopped finding anything fails.
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

const ROOT = path.resolve(import.meta.dirname, '..');
const README_MAX_LINES = 200;

/** The pages read, as absolute paths. */
function pages(): string[] {
  const found: string[] = [path.join(ROOT, 'README.md')];
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.md')) found.push(full);
    }
  };
  walk(path.join(ROOT, 'docs'));
  const integrations = path.join(ROOT, 'integrations');
  const others = ['native/README.md', 'native/media-core/README.md', 'pipelines/README.md', 'harness/README.md'].map((p) => path.join(ROOT, p));
  for (const name of fs.readdirSync(integrations)) others.push(path.join(integrations, name, 'README.md'));
  return [...found, ...others.filter((p) => fs.existsSync(p))];
}

/** The text without fenced code blocks (``` or ~~~, indented or not), lines kept for numbering. */
function withoutFences(text: string): string {
  let fence: string | null = null;
  return text
    .split('\n')
    .map((line) => {
      const m = /^\s*(`{3,}|~{3,})/.exec(line);
      if (fence === null && m) { fence = m[1]!; return ''; }
      if (fence !== null) { if (m && m[1]!.startsWith(fence)) fence = null; return ''; }
      return line;
    })
    .join('\n');
}

/** Inline code spans replaced by a placeholder word (so link text around them stays whole). */
function withoutInlineCode(text: string): string {
  return text.replace(/(`+)[\s\S]*?\1/g, 'code');
}

/** GitHub's heading id: lowercase; drop all but letters, digits, marks, spaces, `-`, `_`; spaces to `-`. */
function slug(heading: string): string {
  const plain = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // links and images: their text
    .replace(/<[^>]+>/g, '') // HTML tags
    .replace(/`/g, '');
  return plain.trim().toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

const slugCache = new Map<string, Set<string>>();
/** The ids of a page's headings, repeats numbered (`x`, `x-1`, `x-2`) as GitHub numbers them. */
function anchorsOf(file: string, text = fs.readFileSync(file, 'utf8')): Set<string> {
  const cached = slugCache.get(file);
  if (cached) return cached;
  const seen = new Map<string, number>();
  const ids = new Set<string>();
  for (const line of withoutFences(text).split('\n')) {
    const m = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    ids.add(n === 0 ? base : `${base}-${n}`);
  }
  slugCache.set(file, ids);
  return ids;
}

/** Every link target of a page with its line, code excluded. */
function targetsOf(text: string): { target: string; line: number }[] {
  const scanned = withoutInlineCode(withoutFences(text));
  const out: { target: string; line: number }[] = [];
  const lineAt = (index: number): number => scanned.slice(0, index).split('\n').length;
  const patterns = [
    /!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g, // [text](target), ![alt](target)
    /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm, // [ref]: target
    /<img\s[^>]*src="([^"]+)"/g,
  ];
  for (const re of patterns) for (const m of scanned.matchAll(re)) out.push({ target: m[1]!, line: lineAt(m.index!) });
  return out;
}

/** Where a relative target points: the file (a folder's README.md when it has an anchor) and the anchor. */
function resolve(from: string, target: string): { file: string; anchor: string | null } | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return null; // http:, https:, mailto:
  const hash = target.indexOf('#');
  const rel = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
  const anchor = hash < 0 ? null : decodeURIComponent(target.slice(hash + 1));
  const file = rel === '' ? from : rel.startsWith('/') ? path.join(ROOT, rel) : path.resolve(path.dirname(from), rel);
  return { file, anchor };
}

/** The problems of one page's links, as `file:line: target: why`. */
function linkProblems(file: string, text: string): string[] {
  const problems: string[] = [];
  const where = (line: number, target: string): string => `${path.relative(ROOT, file)}:${line}: ${target}`;
  for (const { target, line } of targetsOf(text)) {
    const to = resolve(file, target);
    if (!to) continue;
    if (to.file !== ROOT && !to.file.startsWith(ROOT + path.sep)) { problems.push(`${where(line, target)}: outside the repository`); continue; }
    const self = to.file === file;
    if (!self && !fs.existsSync(to.file)) { problems.push(`${where(line, target)}: no such file`); continue; }
    if (to.anchor === null) continue;
    let page = to.file;
    if (!self && fs.statSync(page).isDirectory()) page = path.join(page, 'README.md');
    if (!page.endsWith('.md') || (!self && !fs.existsSync(page))) { problems.push(`${where(line, target)}: an anchor into a file without headings`); continue; }
    if (!anchorsOf(page, self ? text : undefined).has(to.anchor)) problems.push(`${where(line, target)}: no heading #${to.anchor} in ${path.relative(ROOT, page)}`);
  }
  return problems;
}

/** The pages reachable from README.md by links (folders lead to their README.md). */
function reachableFromReadme(): Set<string> {
  const seen = new Set<string>();
  const queue = [path.join(ROOT, 'README.md')];
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const { target } of targetsOf(fs.readFileSync(file, 'utf8'))) {
      const to = resolve(file, target);
      if (!to || !fs.existsSync(to.file)) continue;
      const next = fs.statSync(to.file).isDirectory() ? path.join(to.file, 'README.md') : to.file;
      if (next.endsWith('.md') && fs.existsSync(next)) queue.push(next);
    }
  }
  return seen;
}

test('the slugger gives GitHub\'s ids for two real headings', () => {
  assert.is(slug('Realtime over WebRTC (`/v1/realtime/calls`)'), 'realtime-over-webrtc-v1realtimecalls');
  assert.is(slug('Avatar-only sessions: the face of any agent'), 'avatar-only-sessions-the-face-of-any-agent');
  assert.ok(anchorsOf(path.join(ROOT, 'docs/webrtc.md')).has('realtime-over-webrtc-v1realtimecalls'));
  assert.ok(anchorsOf(path.join(ROOT, 'docs/avatar-mode.md')).has('avatar-only-sessions-the-face-of-any-agent'));
});

test('every relative link and image of the documentation resolves, anchors included', () => {
  const all = pages();
  assert.ok(all.length >= 12, `only ${all.length} pages found`);
  const problems = all.flatMap((file) => linkProblems(file, fs.readFileSync(file, 'utf8')));
  assert.equal(problems, [], `broken links:\n${problems.join('\n')}`);
});

test('every page under docs/ is reachable from README.md', () => {
  const reached = reachableFromReadme();
  const unreached = pages().filter((p) => p.startsWith(path.join(ROOT, 'docs') + path.sep) && !reached.has(p));
  assert.equal(unreached.map((p) => path.relative(ROOT, p)), [], 'add these to the README\'s Documentation table (or link them from a page it reaches)');
});

test('the README fits on a few screens', () => {
  const lines = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').split('\n').length;
  assert.ok(lines <= README_MAX_LINES, `README.md has ${lines} lines (at most ${README_MAX_LINES}): it is the first visit's page; reference text belongs in the docs/ page for its audience, linked from the README's Documentation table`);
});

test('self-check: a made-up page with a broken link, a broken anchor and a fenced fake link', () => {
  const file = path.join(ROOT, 'docs', 'made-up-page.md');
  const text = [
    '# A made-up page',
    '',
    'Good: [the API](api.md#session-fields), [here](#a-made-up-page), [a folder](../native), ![a picture](strip-512x512.jpg).',
    'Broken: [gone](no-such-page.md) and [no heading](api.md#no-such-heading).',
    '',
    '```md',
    '[fenced, not a link](also-not-there.md)',
    '```',
    'Inline code is not a link either: `[x](missing.md)`.',
  ].join('\n');
  assert.equal(linkProblems(file, text), [
    'docs/made-up-page.md:4: no-such-page.md: no such file',
    'docs/made-up-page.md:4: api.md#no-such-heading: no heading #no-such-heading in docs/api.md',
  ]);
});

test.run();
