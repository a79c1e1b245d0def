// deltafin serve through the official openai npm client. Env: DF_URL (http://127.0.0.1:PORT),
// DF_API_KEY, DF_MODEL (served model id). Prints one line per check; exit 1 on any failure.
import OpenAI from 'openai';

const base = process.env.DF_URL;
const apiKey = process.env.DF_API_KEY;
const model = process.env.DF_MODEL;
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 120000 });
let failed = 0;
function check(cond, what, detail = '') {
  console.log(`${cond ? 'ok' : 'FAIL'} - ${what}${!cond && detail ? ': ' + detail : ''}`);
  if (!cond) failed++;
}
async function expectStatus(p, status, what) {
  try { await p; check(false, what, 'no error'); }
  catch (e) { check(e.status === status, what, `status ${e.status} ${e.message}`); }
}
async function metric(name) {
  const t = await (await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${apiKey}` } })).text();
  const m = t.match(new RegExp(`^deltafin_${name} ([0-9.e+]+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

const models = await client.models.list();
check(models.data.length === 1 && models.data[0].id === model, 'models.list returns the served model', JSON.stringify(models.data));

const messages = [
  { role: 'system', content: 'You are a test.' },
  { role: 'user', content: 'Say something about SSDs.' },
];
const params = { model, messages, max_tokens: 24, seed: 1234, temperature: 0.9 };
const full = await client.chat.completions.create(params);
const text = full.choices[0].message.content;
check(typeof text === 'string' && text.length > 0, 'chat completion has content', JSON.stringify(full));
check(full.object === 'chat.completion' && full.choices[0].message.role === 'assistant', 'chat completion shape');
check(full.usage && full.usage.prompt_tokens > 0 && full.usage.completion_tokens > 0 &&
      full.usage.total_tokens === full.usage.prompt_tokens + full.usage.completion_tokens, 'chat usage', JSON.stringify(full.usage));
check(['stop', 'length'].includes(full.choices[0].finish_reason), 'chat finish_reason');

const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
let streamed = '', finish = null, usage = null, nchunks = 0;
for await (const ch of stream) {
  nchunks++;
  if (ch.usage) usage = ch.usage;
  if (!ch.choices.length) continue;
  if (ch.choices[0].delta?.content) streamed += ch.choices[0].delta.content;
  if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
}
check(nchunks >= 3, 'stream sent several chunks', String(nchunks));
check(streamed === text, 'streamed chat text equals the non-streamed text (same seed)', JSON.stringify({ streamed, text }));
check(finish === full.choices[0].finish_reason, 'stream finish_reason', `${finish}`);
check(usage && usage.completion_tokens === full.usage.completion_tokens, 'stream usage chunk', JSON.stringify(usage));

const cparams = { model, prompt: 'Once upon a time', max_tokens: 16, seed: 99, temperature: 0.7 };
const comp = await client.completions.create(cparams);
check(comp.object === 'text_completion' && typeof comp.choices[0].text === 'string' && comp.choices[0].text.length > 0,
      'completion has text', JSON.stringify(comp));
check(comp.usage.completion_tokens > 0 && comp.usage.completion_tokens <= 16, 'completion usage');
let ctext = '';
for await (const ch of await client.completions.create({ ...cparams, stream: true })) ctext += ch.choices[0]?.text ?? '';
check(ctext === comp.choices[0].text, 'streamed completion equals the non-streamed one', JSON.stringify({ ctext, t: comp.choices[0].text }));

// stop strings: the text must end before the stop string
const probe = await client.completions.create({ model, prompt: 'Hello', max_tokens: 12, seed: 5, temperature: 0 });
const ptext = probe.choices[0].text;
if (ptext.length > 4) {
  const stopStr = ptext.slice(2, 4);
  const stopped = await client.completions.create({ model, prompt: 'Hello', max_tokens: 12, seed: 5, temperature: 0, stop: [stopStr] });
  check(stopped.choices[0].text === ptext.slice(0, ptext.indexOf(stopStr)) && stopped.choices[0].finish_reason === 'stop',
        'stop string cuts the text', JSON.stringify({ ptext, stopStr, got: stopped.choices[0].text }));
}

const lp = await client.chat.completions.create({ ...params, max_tokens: 6, logprobs: true, top_logprobs: 3 });
const content = lp.choices[0].logprobs?.content ?? [];
check(content.length === lp.usage.completion_tokens && content.every(c => c.logprob <= 0 && c.top_logprobs.length === 3),
      'chat logprobs/top_logprobs', JSON.stringify(lp.choices[0].logprobs).slice(0, 300));

await expectStatus(client.chat.completions.create({ ...params, model: 'no-such-model' }), 404, 'unknown model -> 404');
const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'wrong-key', maxRetries: 0 });
await expectStatus(bad.models.list(), 401, 'wrong API key -> 401');
await expectStatus(client.chat.completions.create({ ...params, max_tokens: -5 }), 400, 'negative max_tokens -> 400');

// a client that goes away stops its generation
const before = await metric('completions_cancelled_total');
const ac = new AbortController();
const long = await client.chat.completions.create({ model, messages, seed: 1, stream: true }, { signal: ac.signal });
let got = 0;
try { for await (const ch of long) { if (++got >= 3) ac.abort(); } } catch (e) { /* aborted */ }
let after = before;
for (let i = 0; i < 50 && after <= before; i++) { await new Promise(r => setTimeout(r, 100)); after = await metric('completions_cancelled_total'); }
check(after === before + 1, 'aborted stream cancels its generation', `${before} -> ${after}`);
const proc = await metric('requests_processing');
check(proc === 0, 'no request left processing', String(proc));

console.log(failed ? `client tests: ${failed} FAILED` : 'client tests: all passed');
process.exit(failed ? 1 : 0);
