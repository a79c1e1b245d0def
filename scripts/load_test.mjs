// Load test client for deltafin serve (no dependencies: Node >= 18 fetch).
// Usage: node scripts/load_test.mjs URL API_KEY SERVER_PID [clients=32] [requests=200] [rounds=4]
// Runs `requests` requests in `rounds` rounds with `clients` concurrent clients (chat, streamed
// chat, completion; a few deliberately bad ones), checks every answer (200 with text and usage,
// or the expected error status), samples the server's RSS after each round, prints one JSON
// line with throughput and latency percentiles. Exit 1 on any wrong answer or RSS growth.
import { readFileSync } from 'node:fs';

const [url, key, pid, nClients = '32', nReq = '200', nRounds = '4'] = process.argv.slice(2);
const clients = Number(nClients), total = Number(nReq), rounds = Number(nRounds);
const H = { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` };
const rss = () => Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]) * 1024;

let bad = 0, refused = 0, genTokens = 0;
const lat = [];
function fail(i, what) { bad++; console.error(`request ${i}: ${what}`); }

async function one(i) {
  const kind = i % 10;
  const t0 = performance.now();
  let body, path = '/v1/chat/completions', expect = 200;
  const messages = [{ role: 'user', content: `Request ${i}: tell me about disks.` }];
  if (kind < 4) body = { messages, max_tokens: 32, seed: i };
  else if (kind < 7) body = { messages, max_tokens: 32, seed: i, stream: true, stream_options: { include_usage: true } };
  else if (kind < 9) { path = '/v1/completions'; body = { prompt: `Once upon a time ${i}`, max_tokens: 32, seed: i }; }
  else { body = { messages: 'not an array' }; expect = 400; }
  const r = await fetch(url + path, { method: 'POST', headers: H, body: JSON.stringify(body) });
  const text = await r.text();
  const ms = performance.now() - t0;
  if (r.status === 429 || r.status === 503) {
    refused++;
    if (!JSON.parse(text).error?.message) fail(i, `refusal without an error body: ${text}`);
    return;
  }
  if (r.status !== expect) return fail(i, `status ${r.status}: ${text.slice(0, 200)}`);
  if (expect !== 200) {
    if (!JSON.parse(text).error?.message) fail(i, `error without a message: ${text}`);
    return;
  }
  lat.push(ms);
  if (body.stream) {
    const events = text.split('\n\n').filter(e => e.startsWith('data: '));
    if (events.at(-1) !== 'data: [DONE]') return fail(i, 'stream without [DONE]');
    const chunks = events.slice(0, -1).map(e => JSON.parse(e.slice(6)));
    const usage = chunks.find(c => c.usage)?.usage;
    if (!usage || !chunks.some(c => c.choices[0]?.finish_reason)) return fail(i, 'stream without usage/finish_reason');
    genTokens += usage.completion_tokens;
  } else {
    const j = JSON.parse(text);
    const c = j.choices?.[0];
    if (!c || typeof (c.message?.content ?? c.text) !== 'string' || !j.usage) return fail(i, `bad body ${text.slice(0, 200)}`);
    genTokens += j.usage.completion_tokens;
  }
}

const rssRounds = [];
const t0 = performance.now();
let next = 0;
for (let r = 0; r < rounds; r++) {
  const end = Math.round(total * (r + 1) / rounds);
  const worker = async () => { while (next < end) { const i = next++; try { await one(i); } catch (e) { fail(i, String(e)); } } };
  await Promise.all(Array.from({ length: clients }, worker));
  rssRounds.push(rss());
}
const secs = (performance.now() - t0) / 1000;
lat.sort((a, b) => a - b);
const pct = p => lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] : 0;
const growth = rssRounds.at(-1) - rssRounds[0];
const flat = growth <= Math.max(8 << 20, rssRounds[0] * 0.1);
if (!flat) { bad++; console.error(`RSS grew from ${rssRounds[0]} to ${rssRounds.at(-1)} bytes`); }
console.log(JSON.stringify({
  requests: total, clients, ok: lat.length, refused, wrong: bad, seconds: +secs.toFixed(2),
  req_per_s: +(total / secs).toFixed(2), gen_tok_per_s: +(genTokens / secs).toFixed(1),
  p50_ms: +pct(0.5).toFixed(1), p99_ms: +pct(0.99).toFixed(1), rss_rounds: rssRounds, rss_flat: flat,
}));
process.exit(bad ? 1 : 0);
