// Memory-under-load client for deltafin serve (no dependencies: Node >= 18).
// Usage: node scripts/load_mem.mjs URL API_KEY SERVER_PID SECONDS [clients=32] [max_tokens=600] [cgroup_dir]
// `clients` workers send long requests back to back for SECONDS (chat and completion, half of
// them streamed; every 8th streamed one is dropped by the client mid-stream), checking every
// answer. The server's RSS (VmRSS) and, with cgroup_dir, the cgroup's charge are sampled every
// second. Prints one JSON line: requests, tokens, errors, samples, peak RSS, the mean RSS of the
// first and of the last minute of the load (SECONDS) and the least-squares RSS slope between
// them (bytes per minute), the RSS when the last request ended and how long they took to drain.
// Exit 1 on a wrong answer or when the server is gone. Requests go through node:http without
// timeouts: fetch (undici) gives up after 300 s without headers or body bytes, which a queued
// request on a loaded 2-core machine exceeds ("fetch failed" / "terminated" are then the
// client's own doing, not the server's). `dropped` counts the client's deliberate hang-ups.
import { readFileSync } from 'node:fs';
import http from 'node:http';

const [url, key, pid, secs, nClients = '32', maxTok = '600', cg = ''] = process.argv.slice(2);
const clients = Number(nClients), deadline = performance.now() + Number(secs) * 1000, max_tokens = Number(maxTok);
const H = { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` };
const rss = () => Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]) * 1024;
const cgUse = () => cg ? Number(readFileSync(`${cg}/memory.usage_in_bytes`, 'utf8')) : 0;

let bad = 0, done = 0, dropped = 0, refused = 0, tokens = 0;
const samples = [];
function fail(i, what) { bad++; if (bad < 20) console.error(`request ${i}: ${what}`); }

// POST without timeouts; the whole body as text, or (hangUp) only until the first chunk arrives
function post(path, data, hangUp) {
  return new Promise((resolve, reject) => {
    const u = new URL(url + path);
    const rq = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST',
                              headers: { ...H, 'Content-Length': Buffer.byteLength(data) } }, res => {
      const chunks = [];
      res.on('data', c => {
        chunks.push(c);
        if (hangUp && res.statusCode === 200) { rq.destroy(); resolve({ status: 200, text: '' }); }
      });
      res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    rq.on('error', e => { if (!(hangUp && rq.destroyed)) reject(e); });
    rq.end(data);
  });
}

async function one(i) {
  const stream = i % 2 === 1, chat = i % 4 < 2;
  const path = chat ? '/v1/chat/completions' : '/v1/completions';
  const body = chat ? { messages: [{ role: 'user', content: `Tell story number ${i} at length.` }], max_tokens, seed: i, stream }
                    : { prompt: `Chapter ${i}. Once upon a time`, max_tokens, seed: i, stream };
  const hangUp = stream && i % 16 === 1; // the client hangs up after the first chunk
  const r = await post(path, JSON.stringify(body), hangUp);
  if (r.status === 429 || r.status === 503) { refused++; return; }
  if (r.status !== 200) return fail(i, `status ${r.status}: ${r.text.slice(0, 200)}`);
  if (hangUp) { dropped++; return; }
  const text = r.text;
  if (stream) {
    const ev = text.split('\n\n').filter(e => e.startsWith('data: '));
    if (ev.at(-1) !== 'data: [DONE]') return fail(i, 'stream without [DONE]');
    tokens += ev.length - 1;
  } else {
    const j = JSON.parse(text);
    if (!j.usage || !j.choices?.[0]) return fail(i, `bad body ${text.slice(0, 200)}`);
    tokens += j.usage.completion_tokens;
  }
  done++;
}

const t0 = performance.now();
const sampler = setInterval(() => {
  try { samples.push([(performance.now() - t0) / 1000, rss(), cgUse()]); } catch (e) { bad++; console.error(`server gone: ${e}`); }
}, 1000);
let next = 0;
const worker = async () => {
  while (performance.now() < deadline) { const i = next++; try { await one(i); } catch (e) { fail(i, String(e)); } }
};
await Promise.all(Array.from({ length: clients }, worker));
clearInterval(sampler);
const T = (performance.now() - t0) / 1000, L = Number(secs);
const mean = a => a.reduce((s, x) => s + x, 0) / Math.max(1, a.length);
// the first and the last minute of the load (new requests started until L; the requests still
// running after it drain with fewer and fewer clients, which is not load any more)
const first = samples.filter(s => s[0] <= 60).map(s => s[1]);
const last = samples.filter(s => s[0] >= L - 60 && s[0] <= L).map(s => s[1]);
// least-squares slope of RSS over time from the end of the first minute to the end of the load
const w = samples.filter(s => s[0] > 60 && s[0] <= L);
const mt = mean(w.map(s => s[0])), mr = mean(w.map(s => s[1]));
const slope = w.length > 2 ? w.reduce((s, x) => s + (x[0] - mt) * (x[1] - mr), 0) / w.reduce((s, x) => s + (x[0] - mt) ** 2, 0) * 60 : 0;
console.log(JSON.stringify({
  seconds: +T.toFixed(1), clients, requests_done: done, dropped, refused, wrong: bad, tokens,
  tok_per_s: +(tokens / T).toFixed(1), samples: samples.length,
  peak_rss: Math.max(...samples.map(s => s[1])), peak_cgroup: Math.max(...samples.map(s => s[2])),
  rss_first_min: Math.round(mean(first)), rss_last_min: Math.round(mean(last)), rss_slope_per_min: Math.round(slope),
  rss_end: samples.length ? samples.at(-1)[1] : 0, drain_seconds: +(T - L).toFixed(1),
}));
process.exit(bad ? 1 : 0);
