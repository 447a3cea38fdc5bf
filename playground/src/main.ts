/**
 * The playground page: a person enters an API key (kept in this browser's localStorage, never in a
 * URL; the server never serves a key), picks a face, voice and motion from the server's lists, and
 * talks to the avatar over WebRTC (video and voice as media) or WebSocket (JPEG frames on a
 * canvas, PCM through Web Audio). Where the browser has WebGL2 the face is drawn in the page by
 * default (video_render: client; face-view.ts), from a motion stream instead of video. Each connection gets its own ephemeral key
 * (/v1/realtime/client_secrets) bound to the chosen session config. With "Demo tools" on, the
 * model is offered functions the page itself answers (demo-tools.ts); their calls and outputs show
 * in the transcript.
 *
 * `window.playground` exposes a read-only snapshot of what the page shows (for the end-to-end tests
 * and for anyone curious in the console).
 */
import { Api, Problem, type AssetEntry } from './api.js';
import { toBase64, type Connection, type LiveStats, type ServerEvent } from './connection.js';
import { DEMO_TOOLS, runDemoTool } from './demo-tools.js';
import { canDrawFaces } from './face-view.js';
import { RtcConnection } from './rtc.js';
import { WsConnection } from './ws.js';

const KEY_STORAGE = 'avatar-playground.api-key';
const MAX_LOG = 300;
/** The server-VAD silence that ends a turn (the session default): end of speech = speech_stopped − this. */
const VAD_SILENCE_MS = 500;

const $ = <T extends HTMLElement>(id: string): T => {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} is missing from the page`);
  return el as T;
};

const ui = {
  status: $('status'),
  keyForm: $<HTMLFormElement>('key-form'),
  key: $<HTMLInputElement>('api-key'),
  video: $<HTMLVideoElement>('video'),
  canvas: $<HTMLCanvasElement>('canvas'),
  face: $<HTMLCanvasElement>('face'),
  render: $<HTMLSelectElement>('render'),
  audio: $<HTMLAudioElement>('audio'),
  placeholder: $('placeholder'),
  stats: $('stats'),
  statFirstFrame: $('stat-first-frame'),
  statFirstAudio: $('stat-first-audio'),
  statFps: $('stat-fps'),
  statBitrate: $('stat-bitrate'),
  statAv: $('stat-av'),
  connect: $<HTMLButtonElement>('connect'),
  hangup: $<HTMLButtonElement>('hangup'),
  micMode: $<HTMLSelectElement>('mic-mode'),
  talk: $<HTMLButtonElement>('talk'),
  interrupt: $<HTMLButtonElement>('interrupt'),
  demoTools: $<HTMLInputElement>('demo-tools'),
  error: $('error'),
  errorText: $('error-text'),
  errorAction: $<HTMLButtonElement>('error-action'),
  faces: $('faces'),
  faceFile: $<HTMLInputElement>('face-file'),
  uploadNote: $('upload-note'),
  voice: $<HTMLSelectElement>('voice'),
  driving: $<HTMLSelectElement>('driving'),
  sessionId: $('session-id'),
  transcript: $<HTMLOListElement>('transcript'),
  textForm: $<HTMLFormElement>('text-form'),
  text: $<HTMLInputElement>('text'),
  send: $<HTMLButtonElement>('send'),
  log: $<HTMLOListElement>('log'),
  logCount: $('log-count'),
};

type State = 'idle' | 'connecting' | 'connected' | 'ended' | 'error';

/** A function call the model made, and what the page answered (null: not answered here). */
interface ToolCall {
  callId: string;
  name: string;
  arguments: string;
  output: string | null;
}

const page = {
  state: 'idle' as State,
  conn: null as Connection | null,
  face: 'default',
  connectStartedAt: 0,
  firstFrameMs: null as number | null,
  /** When the current turn's input ended (end of speech, or a message sent). */
  turnEndedAt: null as number | null,
  firstAudioMs: [] as number[],
  events: [] as ServerEvent[],
  stats: null as LiveStats | null,
  lastError: null as string | null,
  endedSession: null as { id: string; status: string; durationSeconds: number | null } | null,
  statsTimer: 0,
  micTracks: [] as MediaStreamTrack[],
  /** Whether the demo tools were offered to this connection's session (the last session.update said so). */
  toolsOffered: false,
  toolCalls: [] as ToolCall[],
  /** Outputs of the calls each response made, sent when it is done (response id → calls). */
  toolOutputs: new Map<string, ToolCall[]>(),
};

let storedKey: string | null = null;
try {
  storedKey = localStorage.getItem(KEY_STORAGE);
} catch {
  // storage disabled: the key lives for this page only
}
const api = new Api(() => storedKey);

// ------------------------------------------------------------------------------------------------
// Status, errors, log

function setState(state: State, text: string): void {
  page.state = state;
  ui.status.dataset.state = state === 'ended' ? 'idle' : state;
  ui.status.textContent = text;
  const live = state === 'connected';
  const busy = state === 'connecting';
  ui.connect.hidden = live;
  ui.connect.disabled = busy;
  ui.connect.textContent = busy ? 'Connecting…' : 'Connect';
  ui.hangup.hidden = !live;
  ui.interrupt.disabled = !live;
  ui.text.disabled = !live;
  ui.send.disabled = !live;
  ui.talk.hidden = ui.micMode.value !== 'ptt';
  ui.talk.disabled = !live;
  for (const radio of document.querySelectorAll<HTMLInputElement>('input[name=transport]')) radio.disabled = live || busy;
  ui.micMode.disabled = live || busy;
}

/** Server error codes that end the session (the connection closes right after). */
const ENDING_ERRORS: Record<string, { why: string; kind: 'ended' | 'key' }> = {
  session_ended: { why: 'The session was ended on the server (by its owner or its maximum duration).', kind: 'ended' },
  key_revoked: { why: 'Your API key has been revoked. Enter another key.', kind: 'key' },
};

function showError(message: string, action?: { label: string; run: () => void }): void {
  page.lastError = message;
  ui.error.hidden = false;
  ui.errorText.textContent = message;
  ui.errorAction.hidden = !action;
  ui.errorAction.textContent = '';
  ui.errorAction.onclick = null;
  if (action) {
    ui.errorAction.textContent = action.label;
    ui.errorAction.onclick = () => {
      clearError();
      action.run();
    };
  }
}

function clearError(): void {
  ui.error.hidden = true;
  page.lastError = null;
}

function explain(err: unknown): Problem {
  if (err instanceof Problem) return err;
  return new Problem(`Something went wrong: ${err instanceof Error ? err.message : String(err)}`, 'server');
}

function showProblem(problem: Problem): void {
  if (problem.kind === 'key') {
    showError(problem.message);
    ui.key.focus();
  } else if (problem.kind === 'busy' || problem.kind === 'network') {
    showError(problem.message, { label: problem.kind === 'busy' ? 'Try again' : 'Reconnect', run: () => void connect() });
  } else showError(problem.message);
}

function log(direction: 'in' | 'out', event: { type?: unknown; [k: string]: unknown }): void {
  const item = document.createElement('li');
  const type = String(event.type);
  item.className = direction === 'out' ? 'out' : type === 'error' ? 'err' : '';
  const detail = type === 'error' ? ` ${(event.error as { message?: string } | undefined)?.message ?? ''}` : '';
  item.textContent = `${direction === 'out' ? '→' : '←'} ${type}${detail}`;
  item.title = JSON.stringify(event, (k, v) => (k === 'delta' || k === 'audio') && typeof v === 'string' && v.length > 80 ? `${v.slice(0, 80)}…` : v);
  ui.log.prepend(item);
  while (ui.log.children.length > MAX_LOG) ui.log.lastElementChild?.remove();
  ui.logCount.textContent = String(page.events.length);
}

function send(event: Record<string, unknown>): void {
  if (!page.conn) return;
  page.conn.send(event);
  if (event.type !== 'input_audio_buffer.append') log('out', event);
}

// ------------------------------------------------------------------------------------------------
// Transcript

const bubbles = new Map<string, HTMLLIElement>();

/** A line of the transcript: what a side said, or a function call and its output. */
type Line = 'user' | 'assistant' | 'tool call' | 'tool output';

function bubble(key: string, role: Line, text = ''): HTMLLIElement {
  let li = bubbles.get(key);
  if (!li) {
    li = document.createElement('li');
    li.className = role;
    li.textContent = text;
    bubbles.set(key, li);
    ui.transcript.append(li);
  }
  ui.transcript.scrollTop = ui.transcript.scrollHeight;
  return li;
}

function onServerEvent(event: ServerEvent): void {
  page.events.push(event);
  if (event.type !== 'response.output_audio.delta' && event.type !== 'response.output_image.delta') log('in', event);
  switch (event.type) {
    case 'input_audio_buffer.speech_started':
      bubble(`speech:${String(event.item_id)}`, 'user', '…').classList.add('pending');
      break;
    case 'input_audio_buffer.speech_stopped':
      page.turnEndedAt = performance.now() - VAD_SILENCE_MS;
      break;
    case 'conversation.item.input_audio_transcription.delta': {
      const li = bubble(`speech:${String(event.item_id)}`, 'user');
      if (li.classList.contains('pending')) {
        li.classList.remove('pending');
        li.textContent = '';
      }
      li.textContent += String(event.delta);
      break;
    }
    case 'conversation.item.input_audio_transcription.completed': {
      const li = bubble(`speech:${String(event.item_id)}`, 'user');
      li.classList.remove('pending');
      li.textContent = String(event.transcript) || '(nothing heard)';
      break;
    }
    case 'response.output_audio_transcript.delta':
    case 'response.output_text.delta':
      bubble(`reply:${String(event.response_id)}`, 'assistant').textContent += String(event.delta);
      break;
    case 'output_audio_buffer.started':
      firstAudio();
      break;
    case 'response.output_item.added': {
      const item = event.item as { id?: string; type?: string; name?: string };
      if (item.type === 'function_call') bubble(`call:${String(item.id)}`, 'tool call', `${String(item.name)}(`).classList.add('pending');
      break;
    }
    case 'response.function_call_arguments.delta':
      bubble(`call:${String(event.item_id)}`, 'tool call').textContent += String(event.delta);
      break;
    case 'response.function_call_arguments.done':
      functionCall(String(event.response_id), String(event.item_id), String(event.call_id), String(event.name), String(event.arguments));
      break;
    case 'response.output_item.done': {
      // A call cut off (interrupted, or the output limit) has no arguments.done: it is not run.
      const item = event.item as { id?: string; type?: string; status?: string };
      const li = item.type === 'function_call' && item.status === 'incomplete' ? bubbles.get(`call:${String(item.id)}`) : undefined;
      li?.classList.remove('pending');
      li?.classList.add('cut');
      break;
    }
    case 'response.done': {
      const response = event.response as { id: string; status: string; output?: Array<{ content?: Array<{ transcript?: string; text?: string }> }> };
      answerCalls(response.id, response.status);
      const li = bubbles.get(`reply:${response.id}`);
      if (li && response.status === 'cancelled') {
        li.classList.add('cut');
        const kept = response.output?.[0]?.content?.[0]?.transcript;
        if (typeof kept === 'string') li.textContent = kept;
      }
      break;
    }
    case 'error': {
      const error = event.error as { message?: string; code?: string };
      const said = `The avatar says: ${error.message ?? error.code ?? 'an error'}`;
      // The server sends these just before it closes the connection: say so at once, with what to
      // do, rather than an error with no way on until the close arrives.
      const ending = error.code ? ENDING_ERRORS[error.code] : undefined;
      if (ending) {
        page.conn?.close();
        lost(`${ending.why} (${said})`, ending.kind);
      } else showError(said);
      break;
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Demo tools: offered by session.update, answered here

function offerTools(): void {
  page.toolsOffered = ui.demoTools.checked;
  send({ type: 'session.update', session: { type: 'realtime', tools: page.toolsOffered ? DEMO_TOOLS : [], tool_choice: 'auto' } });
}

/** The page's background: what set_background_color changes. */
function setBackground(color: string): void {
  document.documentElement.style.setProperty('--bg', color);
}

/** A call the model finished: shown, and run at once when the page offered the tools. */
function functionCall(responseId: string, itemId: string, callId: string, name: string, args: string): void {
  const li = bubble(`call:${itemId}`, 'tool call');
  li.classList.remove('pending');
  li.textContent = `${name}(${args})`;
  const call: ToolCall = { callId, name, arguments: args, output: null };
  page.toolCalls.push(call);
  // Tools this page did not offer are someone else's to answer (a backend on the call's sideband).
  if (!page.toolsOffered) return;
  const { output, failed } = runDemoTool(name, args, { setBackground });
  call.output = output;
  bubble(`output:${itemId}`, 'tool output', output).classList.toggle('failed', failed);
  page.toolOutputs.set(responseId, [...(page.toolOutputs.get(responseId) ?? []), call]);
}

/**
 * The response is done: its calls' outputs go to the conversation, then one response.create asks
 * the model to go on with them (not before: a response.create while one is active is refused). A
 * response cut short (the person spoke over it) gets no follow-up: the person's turn comes first.
 */
function answerCalls(responseId: string, status: string): void {
  const calls = page.toolOutputs.get(responseId);
  if (!calls) return;
  page.toolOutputs.delete(responseId);
  for (const call of calls) send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: call.callId, output: call.output } });
  if (status === 'completed') send({ type: 'response.create' });
}

function firstAudio(): void {
  if (page.turnEndedAt === null) return;
  const ms = Math.round(performance.now() - page.turnEndedAt);
  page.turnEndedAt = null;
  page.firstAudioMs.push(ms);
  ui.statFirstAudio.textContent = `${ms} ms`;
}

// ------------------------------------------------------------------------------------------------
// Assets

async function loadAssets(): Promise<void> {
  try {
    const [faces, voices, driving] = await Promise.all([api.list('faces'), api.list('voices'), api.list('driving')]);
    renderFaces(faces);
    fillSelect(ui.voice, voices);
    fillSelect(ui.driving, driving);
  } catch (err) {
    showProblem(explain(err));
  }
}

function fillSelect(select: HTMLSelectElement, entries: AssetEntry[]): void {
  const current = select.value;
  select.replaceChildren(
    ...entries.map((e) => {
      const option = document.createElement('option');
      option.value = e.id;
      option.textContent = e.description ? `${e.id} — ${e.description}` : e.id;
      return option;
    }),
  );
  if (entries.some((e) => e.id === current)) select.value = current;
}

function renderFaces(faces: AssetEntry[]): void {
  ui.faces.replaceChildren(
    ...faces.map((f) => {
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'face';
      button.setAttribute('role', 'radio');
      button.setAttribute('aria-checked', String(f.id === page.face));
      button.title = f.description || f.id;
      button.dataset.id = f.id;
      const img = document.createElement('img');
      img.alt = f.description || f.id;
      button.append(img);
      void api.faceImage(f.id).then((url) => (img.src = url)).catch(() => undefined);
      button.onclick = () => chooseFace(f.id);
      return button;
    }),
  );
}

function chooseFace(id: string): void {
  page.face = id;
  for (const b of ui.faces.querySelectorAll<HTMLElement>('.face')) b.setAttribute('aria-checked', String(b.dataset.id === id));
  if (page.state !== 'connected') return;
  send({ type: 'session.update', session: { type: 'realtime', face: id } });
  // WebSocket frames come only while the avatar speaks: show the new face's photo until then.
  if (page.conn?.transport === 'websocket') drawStill();
}

async function uploadFace(file: File): Promise<void> {
  if (!storedKey) {
    showError('Enter your API key first: uploads belong to the key that made them.');
    return;
  }
  ui.uploadNote.className = 'note';
  ui.uploadNote.textContent = `Checking ${file.name}…`;
  try {
    const asset = await api.uploadFace(file);
    ui.uploadNote.textContent = 'Uploaded. Your face is ready.';
    page.face = asset.id;
    await loadAssets();
    chooseFace(asset.id);
  } catch (err) {
    const problem = explain(err);
    ui.uploadNote.className = 'note bad';
    ui.uploadNote.textContent = problem.kind === 'input' ? `This photo cannot be used: ${problem.message}` : problem.message;
  }
}

// ------------------------------------------------------------------------------------------------
// Connecting

/** Whether this connection's face is drawn in the page (the Face setting, where WebGL2 works). */
const drawsFace = (): boolean => ui.render.value === 'client' && canDrawFaces();

function sessionConfig(transport: 'webrtc' | 'websocket'): Record<string, unknown> {
  return {
    type: 'realtime',
    // A call's media options come with its key; a socket asks in its URL (ws.ts).
    ...(transport === 'webrtc' && drawsFace() ? { video_render: 'client' } : {}),
    face: page.face,
    voice: ui.voice.value || 'default',
    driving: ui.driving.value || undefined,
    // WebSocket clients get frames as image events only when they ask for them.
    output_modalities: transport === 'websocket' ? ['audio', 'image'] : ['audio'],
  };
}

async function microphone(): Promise<MediaStream | null> {
  if (ui.micMode.value === 'off') return null;
  try {
    return await navigator.mediaDevices.getUserMedia({ audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true } });
  } catch (err) {
    const name = (err as { name?: string }).name;
    throw new Problem(
      name === 'NotAllowedError'
        ? 'The microphone was refused. Allow it for this site in the browser, or set Microphone to Off and type instead.'
        : 'No microphone could be opened. Connect one, or set Microphone to Off and type instead.',
      'input',
    );
  }
}

async function connect(): Promise<void> {
  if (page.state === 'connecting' || page.state === 'connected') return;
  clearError();
  if (!storedKey) {
    showError('Enter your API key first (npm start prints one; npm run keys -- create makes more).');
    ui.key.focus();
    return;
  }
  const transport = (document.querySelector<HTMLInputElement>('input[name=transport]:checked')?.value ?? 'webrtc') as 'webrtc' | 'websocket';
  setState('connecting', 'Connecting…');
  page.connectStartedAt = performance.now();
  page.firstFrameMs = null;
  page.firstAudioMs = [];
  page.endedSession = null;
  ui.statFirstFrame.textContent = '–';
  ui.statFirstAudio.textContent = '–';
  let mic: MediaStream | null = null;
  try {
    mic = await microphone();
    // Push to talk: silent from the first packet, not from when the connection is up (the call's
    // first half second of a talking room was heard, and made a turn nobody asked for).
    for (const t of mic?.getAudioTracks() ?? []) t.enabled = ui.micMode.value !== 'ptt';
    const key = await api.clientSecret(sessionConfig(transport));
    const media = { video: ui.video, canvas: ui.canvas, face: ui.face, audio: ui.audio };
    const handlers = {
      event: onServerEvent,
      firstFrame: () => {
        page.firstFrameMs = Math.round(performance.now() - page.connectStartedAt);
        ui.statFirstFrame.textContent = `${page.firstFrameMs} ms`;
        ui.placeholder.hidden = true;
      },
      audioStarted: () => firstAudio(),
      notice: (why: string) => showError(why),
      lost: (why: string, kind: string) => lost(why, kind),
    };
    const drawFace = drawsFace();
    page.conn = transport === 'webrtc' ? await RtcConnection.connect(api, key, mic, media, handlers, drawFace) : await WsConnection.connect(key, mic, media, handlers, drawFace);
  } catch (err) {
    for (const t of mic?.getTracks() ?? []) t.stop();
    setState('error', 'Not connected');
    const problem = explain(err);
    if (problem.kind === 'input' && mic === null && ui.micMode.value !== 'off') {
      showError(problem.message, {
        label: 'Connect without microphone',
        run: () => {
          ui.micMode.value = 'off';
          void connect();
        },
      });
    } else showProblem(problem);
    return;
  }
  const conn = page.conn;
  conn.setMicOpen(ui.micMode.value !== 'ptt');
  page.toolsOffered = false;
  page.toolOutputs.clear();
  if (ui.demoTools.checked) offerTools();
  page.micTracks = mic?.getTracks() ?? [];
  ui.face.hidden = conn.face === null;
  ui.video.hidden = conn.transport !== 'webrtc' || conn.face !== null;
  ui.canvas.hidden = conn.transport !== 'websocket' || conn.face !== null;
  ui.stats.hidden = false;
  // Over WebSocket, frames come only while the avatar speaks: until then the face's photo stands in.
  if (conn.transport === 'websocket' && !conn.face) drawStill();
  ui.sessionId.textContent = conn.sessionId ?? '';
  setState('connected', `Connected over ${conn.transport === 'webrtc' ? 'WebRTC' : 'WebSocket'}`);
  page.statsTimer = window.setInterval(() => void refreshStats(), 1000);
}

/** The chosen face's picture on the canvas (centre-cropped square), until the first frame. */
function drawStill(): void {
  const img = ui.faces.querySelector<HTMLImageElement>(`.face[data-id="${CSS.escape(page.face)}"] img`);
  const g = ui.canvas.getContext('2d');
  if (!img || !img.complete || !img.naturalWidth || !g) return;
  const side = Math.min(img.naturalWidth, img.naturalHeight);
  g.drawImage(img, (img.naturalWidth - side) / 2, (img.naturalHeight - side) / 2, side, side, 0, 0, ui.canvas.width, ui.canvas.height);
  ui.placeholder.hidden = true;
}

function lost(why: string, kind: string): void {
  teardown();
  setState('error', 'Disconnected');
  if (kind === 'key') showError(why);
  else showError(why, { label: kind === 'busy' ? 'Try again' : 'Reconnect', run: () => void connect() });
}

function teardown(): void {
  window.clearInterval(page.statsTimer);
  for (const t of page.micTracks) t.stop();
  page.micTracks = [];
  page.conn = null;
  ui.placeholder.hidden = false;
}

async function hangup(): Promise<void> {
  const conn = page.conn;
  if (!conn) return;
  const id = conn.sessionId;
  try {
    await conn.hangup();
  } catch (err) {
    showProblem(explain(err));
  }
  teardown();
  setState('ended', 'Call ended');
  if (!id) return;
  // The server records the end as the connection closes; ask until it has.
  for (let attempt = 0; attempt < 20; attempt++) {
    try {
      const session = await api.session(id);
      if (session.status !== 'active' && session.status !== 'pending') {
        page.endedSession = { id, status: session.status, durationSeconds: session.duration_seconds };
        setState('ended', `Call ended after ${Math.round(session.duration_seconds ?? 0)} s`);
        return;
      }
    } catch {
      return; // the key cannot read sessions (an ephemeral-only setup): nothing more to show
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function refreshStats(): Promise<void> {
  const conn = page.conn;
  if (!conn) return;
  try {
    const s = await conn.stats();
    page.stats = s;
    ui.statFps.textContent = s.fps === null ? '–' : s.fps.toFixed(0);
    ui.statBitrate.textContent = s.kbps === null ? '–' : s.kbps >= 1000 ? `${(s.kbps / 1000).toFixed(1)} Mb/s` : `${s.kbps.toFixed(0)} kb/s`;
    ui.statAv.textContent = s.avOffsetMs === null ? '–' : `${s.avOffsetMs >= 0 ? '+' : ''}${s.avOffsetMs.toFixed(0)} ms`;
  } catch {
    // the connection is closing
  }
}

// ------------------------------------------------------------------------------------------------
// Wiring

ui.key.value = storedKey ?? '';
ui.keyForm.onsubmit = (e) => {
  e.preventDefault();
  storedKey = ui.key.value.trim() || null;
  try {
    if (storedKey) localStorage.setItem(KEY_STORAGE, storedKey);
    else localStorage.removeItem(KEY_STORAGE);
  } catch {
    // storage disabled: kept for this page only
  }
  clearError();
  void loadAssets();
};
ui.connect.onclick = () => void connect();
ui.hangup.onclick = () => void hangup();
ui.interrupt.onclick = () => {
  page.conn?.interrupt();
  log('out', { type: page.conn?.transport === 'webrtc' ? 'output_audio_buffer.clear' : 'response.cancel' });
};
ui.textForm.onsubmit = (e) => {
  e.preventDefault();
  const text = ui.text.value.trim();
  if (!text || !page.conn) return;
  ui.text.value = '';
  bubble(`text:${performance.now()}`, 'user', text);
  send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
  send({ type: 'response.create' });
  page.turnEndedAt = performance.now();
};
ui.voice.onchange = () => {
  if (page.state === 'connected') send({ type: 'session.update', session: { type: 'realtime', voice: ui.voice.value } });
};
ui.driving.onchange = () => {
  if (page.state === 'connected') send({ type: 'session.update', session: { type: 'realtime', driving: ui.driving.value } });
};
ui.demoTools.onchange = () => {
  if (page.state === 'connected') offerTools();
};
ui.faceFile.onchange = () => {
  const file = ui.faceFile.files?.[0];
  ui.faceFile.value = '';
  if (file) void uploadFace(file);
};
ui.micMode.onchange = () => setState(page.state, ui.status.textContent ?? '');

// Push to talk: the button, or the space bar outside text fields.
const talk = (open: boolean): void => {
  if (ui.micMode.value !== 'ptt' || !page.conn) return;
  page.conn.setMicOpen(open);
  ui.talk.classList.toggle('held', open);
  ui.talk.textContent = open ? 'Listening…' : 'Hold to talk';
};
ui.talk.onpointerdown = () => talk(true);
ui.talk.onpointerup = () => talk(false);
ui.talk.onpointerleave = () => talk(false);
const typing = (e: KeyboardEvent): boolean => e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement;
window.addEventListener('keydown', (e) => {
  if (e.code === 'Space' && !e.repeat && !typing(e)) {
    e.preventDefault();
    talk(true);
  }
});
window.addEventListener('keyup', (e) => {
  if (e.code === 'Space' && !typing(e)) talk(false);
});
window.addEventListener('pagehide', () => page.conn?.close());

/** A read-only view of what the page shows, for tests and the curious. */
Object.defineProperty(window, 'playground', {
  value: Object.freeze({
    snapshot: () => ({
      state: page.state,
      transport: page.conn?.transport ?? null,
      /** Where the face is drawn, and the frames this page drew (video_render: client). */
      render: page.conn ? (page.conn.face ? 'client' : 'server') : null,
      drawn: page.conn?.face?.drawn.map((d) => ({ ...d })) ?? [],
      sessionId: page.conn?.sessionId ?? page.endedSession?.id ?? null,
      firstFrameMs: page.firstFrameMs,
      firstAudioMs: [...page.firstAudioMs],
      stats: page.stats,
      eventTypes: page.events.map((e) => e.type),
      lastError: page.lastError,
      endedSession: page.endedSession,
      toolCalls: page.toolCalls.map((c) => ({ ...c })),
      background: getComputedStyle(document.documentElement).backgroundColor,
    }),
    events: () => page.events.map((e) => ({ ...e, delta: typeof e.delta === 'string' && e.delta.length > 200 ? '(base64)' : e.delta })),
    refreshStats: () => refreshStats(),
    /** The last frame the page drew itself: its parameters and the canvas's RGB pixels (null: none). */
    drawnFace: () => {
      const face = page.conn?.face;
      return face?.last ? { ptsMs: face.last.ptsMs, frame: { ...face.last.frame }, rgb: toBase64(face.pixels()) } : null;
    },
  }),
});

/** While the server loads its models at start, say so (a conversation now would wait for them). */
async function watchWarmUp(): Promise<void> {
  for (;;) {
    let warming = false;
    try {
      const res = await fetch('/readyz');
      warming = res.status === 503 && ((await res.json()) as { checks?: { models?: string } }).checks?.models === 'warming up';
    } catch {
      return; // unreachable now: connecting will say so
    }
    if (page.state === 'idle') setState('idle', warming ? 'The server is loading its models…' : 'Not connected');
    if (!warming) return;
    await new Promise((r) => setTimeout(r, 2000));
  }
}

setState('idle', 'Not connected');
if (!canDrawFaces()) {
  // No WebGL2: the server draws the face and sends it as video.
  ui.render.value = 'server';
  ui.render.options[0]!.disabled = true;
}
void loadAssets();
void watchWarmUp();
