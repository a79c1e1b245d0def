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

// llama-server compatibility: one model served, so any model id names it; the answer names the served id
const llamaId = await client.chat.completions.create({ ...params, model: 'llama', max_tokens: 2 });
check(llamaId.model === model && llamaId.choices.length === 1, "a llama-server-style model id ('llama') is served", JSON.stringify(llamaId).slice(0, 200));

// ---- tool calls: tool_choice required / a named function force a call in the template's syntax ----
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: {
    type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Rome', 'Tokyo'] }, days: { type: 'integer' } },
    required: ['city'], additionalProperties: false } } },
  { type: 'function', function: { name: 'get_time', description: 'The time', parameters: { type: 'object', properties: {} } } },
];
const tmsgs = [{ role: 'user', content: 'What is the weather in Paris?' }];
const tparams = { model, messages: tmsgs, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 120, seed: 7, temperature: 0.8 };
function argsOk(call) {
  try {
    const a = JSON.parse(call.function.arguments);
    if (call.function.name === 'get_time') return typeof a === 'object' && a !== null && Object.keys(a).length === 0;
    return call.function.name === 'get_weather' && ['Paris', 'Rome', 'Tokyo'].includes(a.city) &&
      (a.days === undefined || Number.isInteger(a.days)) && Object.keys(a).every(k => k === 'city' || k === 'days');
  } catch (e) { return false; }
}
const tc = await client.chat.completions.create(tparams);
const tmsg = tc.choices[0].message, calls = tmsg.tool_calls ?? [];
check(calls.length === 1 && calls[0].type === 'function' && typeof calls[0].id === 'string' && calls[0].id.length > 0 && argsOk(calls[0]),
      'tool_choice required: one tool call with valid arguments', JSON.stringify(tmsg));
check(tmsg.content === null && tc.choices[0].finish_reason === 'tool_calls', 'tool call answer: content null, finish_reason tool_calls',
      JSON.stringify(tc.choices[0]));
const named = await client.chat.completions.create({ ...tparams, tool_choice: { type: 'function', function: { name: 'get_weather' } } });
const ncalls = named.choices[0].message.tool_calls ?? [];
check(ncalls.length === 1 && ncalls[0].function.name === 'get_weather' && argsOk(ncalls[0]), 'tool_choice names a function: that one is called',
      JSON.stringify(named.choices[0].message));
const none = await client.chat.completions.create({ ...tparams, tool_choice: 'none', max_tokens: 8 });
check(!none.choices[0].message.tool_calls && typeof none.choices[0].message.content === 'string', 'tool_choice none: no tool call',
      JSON.stringify(none.choices[0].message));

// streamed: the same call (same seed) arrives as tool_calls deltas
const tstream = await client.chat.completions.create({ ...tparams, stream: true });
const scalls = [];
let tfinish = null, tcontent = '';
for await (const ch of tstream) {
  const c = ch.choices[0];
  if (!c) continue;
  if (c.delta?.content) tcontent += c.delta.content;
  for (const d of c.delta?.tool_calls ?? []) {
    const k = d.index;
    scalls[k] ??= { id: '', name: '', arguments: '' };
    if (d.id) scalls[k].id = d.id;
    if (d.function?.name) scalls[k].name += d.function.name;
    if (d.function?.arguments) scalls[k].arguments += d.function.arguments;
  }
  if (c.finish_reason) tfinish = c.finish_reason;
}
check(scalls.length === 1 && scalls[0].name === calls[0]?.function.name && scalls[0].arguments === calls[0]?.function.arguments &&
      scalls[0].id.length > 0 && tfinish === 'tool_calls' && tcontent === '',
      'streamed tool call equals the non-streamed one', JSON.stringify({ scalls, tfinish, tcontent }));

// the SDK's own message back (content null + tool_calls) and the tool's result render and answer
const followup = await client.chat.completions.create({ model, max_tokens: 6, seed: 3, tools, messages: [
  ...tmsgs, tmsg, { role: 'tool', tool_call_id: calls[0]?.id ?? 'x', content: '{"temperature": 21}' }] });
check(typeof followup.choices[0].message.content === 'string' || followup.choices[0].message.tool_calls,
      'assistant content null + tool result is accepted', JSON.stringify(followup.choices[0]));

// ---- response_format json_schema: the output parses and validates ----
const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' },
  color: { type: 'string', enum: ['red', 'green', 'blue'] }, tags: { type: 'array', items: { type: 'boolean' }, maxItems: 3 } },
  required: ['name', 'age', 'color', 'tags'], additionalProperties: false };
const js = await client.chat.completions.create({ model, messages, max_tokens: 200, seed: 11, temperature: 0.8,
  response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } } });
let parsed = null;
try { parsed = JSON.parse(js.choices[0].message.content); } catch (e) { /* checked below */ }
check(parsed && typeof parsed.name === 'string' && parsed.name.length <= 12 && Number.isInteger(parsed.age) &&
      ['red', 'green', 'blue'].includes(parsed.color) && Array.isArray(parsed.tags) && parsed.tags.length <= 3 &&
      parsed.tags.every(t => typeof t === 'boolean') && Object.keys(parsed).length === 4 && js.choices[0].finish_reason === 'stop',
      'json_schema output parses and validates', JSON.stringify(js.choices[0]));
// json_object with llama.cpp's 'schema' extension (a random model's free keys would never end)
const jo = await client.chat.completions.create({ model, messages, max_tokens: 200, seed: 12, response_format: { type: 'json_object',
  schema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false } } });
let jparsed = null;
try { jparsed = JSON.parse(jo.choices[0].message.content); } catch (e) { /* checked below */ }
check(jparsed !== null && typeof jparsed === 'object' && typeof jparsed.ok === 'boolean', 'json_object output is a JSON object',
      JSON.stringify(jo.choices[0]));

// ---- logit_bias: +100 on one token makes greedy decoding repeat it; -100 bans the greedy choice ----
async function post(path, body) {
  return (await fetch(`${base}${path}`, { method: 'POST', headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body) })).json();
}
const tok = (await post('/tokenize', { content: ' castle' })).tokens;
const piece = (await post('/detokenize', { tokens: [tok[0]] })).content;
const biased = await client.completions.create({ model, prompt: 'Hello', max_tokens: 3, temperature: 0, logit_bias: { [tok[0]]: 100 } });
check(biased.choices[0].text === piece.repeat(3), 'logit_bias +100 forces the token', JSON.stringify({ piece, text: biased.choices[0].text }));
const greedy = await client.completions.create({ model, prompt: 'Hello', max_tokens: 1, temperature: 0, logprobs: 1 });
// the greedy token's id: what 'Hello' + its text tokenizes to beyond 'Hello'
const ptoks = (await post('/tokenize', { content: 'Hello' })).tokens;
const gtok = (await post('/tokenize', { content: 'Hello' + greedy.choices[0].text })).tokens.slice(ptoks.length);
const banned = await client.completions.create({ model, prompt: 'Hello', max_tokens: 1, temperature: 0,
  logit_bias: Object.fromEntries(gtok.map(t => [t, -100])) });
check(gtok.length >= 1 && banned.choices[0].text !== greedy.choices[0].text, 'logit_bias -100 bans the greedy token',
      JSON.stringify({ greedy: greedy.choices[0].text, banned: banned.choices[0].text }));

// ---- n = 2: two choices from one prompt ----
const two = await client.chat.completions.create({ ...params, n: 2, max_tokens: 8 });
check(two.choices.length === 2 && two.choices.every((c, i) => c.index === i && typeof c.message.content === 'string' && c.message.content.length > 0) &&
      two.choices[0].message.content !== two.choices[1].message.content && two.usage.completion_tokens >= 2,
      'n = 2 gives two different choices', JSON.stringify(two.choices));
const twoStream = await client.chat.completions.create({ ...params, n: 2, max_tokens: 8, stream: true });
const stexts = ['', ''];
for await (const ch of twoStream) for (const c of ch.choices) if (c.delta?.content) stexts[c.index] += c.delta.content;
check(stexts[0] === two.choices[0].message.content && stexts[1] === two.choices[1].message.content, 'n = 2 streamed equals non-streamed',
      JSON.stringify({ stexts, two: two.choices.map(c => c.message.content) }));

// ---- embeddings ----
const emb = await client.embeddings.create({ model, input: ['Hello world', 'An SSD'] });
const norm = v => Math.sqrt(v.reduce((a, x) => a + x * x, 0));
check(emb.data.length === 2 && emb.data[0].embedding.length > 0 && emb.data[0].embedding.length === emb.data[1].embedding.length &&
      Math.abs(norm(emb.data[0].embedding) - 1) < 1e-4 && emb.usage.prompt_tokens > 0, 'embeddings: normalized vectors',
      JSON.stringify(emb).slice(0, 200));
const emb1 = await client.embeddings.create({ model, input: 'Hello world' });
check(emb1.data[0].embedding.every((x, i) => Math.abs(x - emb.data[0].embedding[i]) < 1e-6), 'embedding of a text is the same alone and in a batch');

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
