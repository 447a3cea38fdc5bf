import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { RealtimeTestClient } from '../../harness/clients/realtime-client.js';
import { startRealtimeTestServer, type RealtimeTestServer } from '../../harness/servers/realtime-server.js';

const Secrets = suite<{ t: RealtimeTestServer }>('client secrets', {} as { t: RealtimeTestServer });
Secrets.before.each(async (ctx) => {
  ctx.t = await startRealtimeTestServer();
});
Secrets.after.each(async (ctx) => {
  await ctx.t.close();
});

Secrets('the session of a client secret carries an id (OpenAI’s RealtimeSessionCreateResponse requires one); the first connection with the key runs that session', async ({ t }) => {
  const res = await t.request('POST', '/v1/realtime/client_secrets', { json: { session: { type: 'realtime', audio: { output: { voice: 'cedar' } } } } });
  assert.is(res.status, 200, res.text);
  assert.match(res.body.session.id, /^sess_[0-9A-Za-z]{24}$/);
  assert.equal([res.body.session.type, res.body.session.object], ['realtime', 'realtime.session']);

  const first = await RealtimeTestClient.connect(t.url, { key: res.body.value });
  const created = await first.waitFor('session.created');
  assert.is(created.session.id, res.body.session.id, 'session.created names the same session');
  assert.equal([created.session.voice, created.session.audio.output.voice], ['cedar', 'cedar']);
  assert.is((await t.request('GET', `/v1/sessions/${res.body.session.id}`)).body.status, 'active', 'REST sees it');

  const second = await RealtimeTestClient.connect(t.url, { key: res.body.value });
  const again = await second.waitFor('session.created');
  assert.is.not(again.session.id, res.body.session.id, 'a second connection with the same key is another session');
  await first.close();
  await second.close();
});

Secrets('after session.update sets audio.output.voice, every voice field the server echoes agrees', async ({ t }) => {
  const c = await RealtimeTestClient.connect(t.url, { key: t.key, query: 'model=gpt-realtime' });
  await c.waitFor('session.created');
  c.send({ type: 'session.update', session: { type: 'realtime', audio: { output: { voice: 'alloy' } } } });
  const updated = await c.waitFor('session.updated');
  assert.equal([updated.session.voice, updated.session.audio.output.voice], ['alloy', 'alloy']);
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] } });
  c.send({ type: 'response.create' });
  const created = await c.waitFor('response.created');
  assert.is(created.response.audio.output.voice, 'alloy');
  c.send({ type: 'session.update', session: { voice: 'alice' } });
  const flat = await c.waitFor((e) => e.type === 'session.updated' && e.session.voice === 'alice');
  assert.is(flat.session.audio.output.voice, 'alice');
  await c.close();
});

Secrets.run();
