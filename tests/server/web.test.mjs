// The web chat page at / in headless Chromium, driven over the DevTools protocol: the page loads,
// a message typed into it is sent, the answer shows up while it streams and when it is done, and
// a screenshot is saved. Env: DF_URL (server), DF_API_KEY, DF_WS (the browser's DevTools
// WebSocket URL), DF_SHOT (PNG path). Node's own WebSocket (22, or 20-21 with
// --experimental-websocket), else the `ws` package (tests/server: npm ci; Debian 12's node 18).
// Exit 1 on failure.
import { writeFileSync } from 'node:fs';

const { DF_URL: base, DF_API_KEY: apiKey, DF_WS: wsUrl, DF_SHOT: shot } = process.env;
let failed = 0;
function check(cond, what, detail = '') {
  console.log(`${cond ? 'ok' : 'FAIL'} - ${what}${!cond && detail ? ': ' + detail : ''}`);
  if (!cond) failed++;
}
const sleep = ms => new Promise(r => setTimeout(r, ms));

const WS = globalThis.WebSocket ?? (await import('ws')).default;
const ws = new WS(wsUrl);
await new Promise((res, rej) => { ws.onopen = res; ws.onerror = () => rej(new Error(`cannot connect to ${wsUrl}`)); });
let nextId = 1;
const pending = new Map(), waiters = [];
ws.onmessage = ev => {
  const m = JSON.parse(ev.data);
  if (m.id && pending.has(m.id)) {
    const { res, rej } = pending.get(m.id);
    pending.delete(m.id);
    if (m.error) rej(new Error(`${m.error.message}`)); else res(m.result);
  } else if (m.method) {
    for (let i = waiters.length - 1; i >= 0; i--) if (waiters[i].method === m.method) { waiters[i].res(m.params); waiters.splice(i, 1); }
  }
};
function send(method, params = {}, sessionId) {
  const id = nextId++;
  ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
  return new Promise((res, rej) => pending.set(id, { res, rej }));
}
const event = method => new Promise(res => waiters.push({ method, res }));

const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
const S = (m, p) => send(m, p, sessionId);
const evaluate = async expr => (await S('Runtime.evaluate', { expression: expr, returnByValue: true, awaitPromise: true })).result.value;
await S('Page.enable');
await S('Runtime.enable');
await S('Emulation.setDeviceMetricsOverride', { width: 900, height: 640, deviceScaleFactor: 1, mobile: false });
const loaded = event('Page.loadEventFired');
await S('Page.navigate', { url: `${base}/` });
await Promise.race([loaded, sleep(20000)]);
check(await evaluate("document.title") === 'deltafin chat', 'the page loads', await evaluate("document.title"));
// the key is typed into the page (kept in localStorage), then a message is sent with Enter
await evaluate(`(() => { const k = document.getElementById('key'); k.value = ${JSON.stringify(apiKey)};
  k.dispatchEvent(new Event('change')); const t = document.getElementById('in'); t.value = 'Tell me about SSDs.';
  t.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true })); return true; })()`);
let sawStreaming = false, state = null, answer = '', error = null;
for (let i = 0; i < 600; i++) {
  const r = await evaluate(`(() => { const a = document.querySelector('.msg.assistant'); const e = document.querySelector('.msg.error');
    return { state: a ? a.dataset.state : null, text: a ? a.textContent : '', error: e ? e.textContent : null,
             user: document.querySelector('.msg.user')?.textContent ?? null }; })()`);
  if (r.error) { error = r.error; break; }
  if (r.state === 'streaming' && r.text.length > 0) sawStreaming = true;
  state = r.state; answer = r.text;
  if (r.state === 'done') break;
  await sleep(20);
}
check(!error, 'no error shown', error);
check(await evaluate("document.querySelector('.msg.user')?.textContent") === 'Tell me about SSDs.', 'the message shows');
check(state === 'done' && answer.length > 0, 'the answer shows when done', JSON.stringify({ state, answer }));
const updates = Number(await evaluate("document.querySelector('.msg.assistant')?.dataset.updates ?? 0"));
check(updates >= 1, 'the answer was shown from streamed deltas', String(updates));
console.log(`# ${updates} streamed updates; ${sawStreaming ? 'seen' : 'not seen'} mid-stream by the 20 ms poll`);
const model = await evaluate("document.getElementById('model').textContent");
check(model.length > 0, 'the page shows the served model id', model);
const png = (await S('Page.captureScreenshot', { format: 'png' })).data;
writeFileSync(shot, Buffer.from(png, 'base64'));
check(png.length > 2000, `screenshot saved (${shot})`);
await send('Target.closeTarget', { targetId });
ws.close();
console.log(failed ? `web tests: ${failed} FAILED` : 'web tests: all passed');
process.exit(failed ? 1 : 0);
