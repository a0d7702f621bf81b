// The chat page of `solo serve`: talks to the server's own /v1/chat/completions (streamed), keeps
// conversations in localStorage, and shows what the hybrid router did with each request.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY_CONVERSATIONS = "solo.conversations";
const KEY_SETTINGS = "solo.settings";

const state = {
  conversations: [],
  currentId: null,
  settings: { thinking: true, temperature: "", topP: "", maxTokens: "", tools: "", apiKey: "", system: "" },
  // The generation in flight: { controller, conv, reply, el }.
  running: null,
  model: null,
};

// ------------------------------------------------------------------ storage

function load() {
  try {
    state.conversations = JSON.parse(localStorage.getItem(KEY_CONVERSATIONS) || "[]");
    Object.assign(state.settings, JSON.parse(localStorage.getItem(KEY_SETTINGS) || "{}"));
  } catch (e) {
    state.conversations = [];
  }
  // A reply that was streaming when the page went away ended there.
  for (const c of state.conversations) {
    for (const m of c.messages || []) if (m.state === "streaming") m.state = "stopped";
  }
  state.currentId = localStorage.getItem("solo.current");
  if (!state.conversations.some((c) => c.id === state.currentId)) state.currentId = null;
}

function save() {
  try {
    localStorage.setItem(KEY_CONVERSATIONS, JSON.stringify(state.conversations));
    localStorage.setItem(KEY_SETTINGS, JSON.stringify(state.settings));
    if (state.currentId) localStorage.setItem("solo.current", state.currentId);
    else localStorage.removeItem("solo.current");
  } catch (e) {
    setServerState("The browser's storage is full: this conversation is not saved.", true);
  }
}

const randomId = () =>
  "conv-" + Array.from(crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, "0")).join("");

function current() {
  return state.conversations.find((c) => c.id === state.currentId) || null;
}

function newConversation() {
  const conv = { id: randomId(), title: "New chat", created: Date.now(), system: state.settings.system, messages: [] };
  state.conversations.unshift(conv);
  state.currentId = conv.id;
  save();
  return conv;
}

// ------------------------------------------------------------------ rendering

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function renderConversations() {
  const nav = $("conversations");
  nav.replaceChildren();
  for (const c of state.conversations) {
    const row = el("div", "conv" + (c.id === state.currentId ? " current" : ""));
    const open = el("button", "conv-open", c.title);
    open.type = "button";
    open.title = c.title;
    open.addEventListener("click", () => switchTo(c.id));
    const del = el("button", "conv-delete", "×");
    del.type = "button";
    del.title = "Delete this conversation";
    del.setAttribute("aria-label", "Delete " + c.title);
    del.addEventListener("click", () => deleteConversation(c.id));
    row.append(open, del);
    nav.append(row);
  }
}

function renderMessages() {
  const box = $("messages");
  box.replaceChildren();
  const conv = current();
  if (!conv || conv.messages.length === 0) {
    box.append(el("div", "empty", "Ask anything. Replies stream from this machine's solo serve."));
    return;
  }
  for (const m of conv.messages) box.append(messageElement(m));
  box.scrollTop = box.scrollHeight;
}

function messageElement(m) {
  if (m.role === "user") {
    const e = el("div", "msg user");
    if ((m.images || []).length) {
      const thumbs = el("div", "thumbs");
      for (const url of m.images) thumbs.append(thumbnail(url));
      e.append(thumbs);
    }
    e.append(el("div", "content", m.content));
    return e;
  }
  if (m.role === "notice") {
    const e = el("div", "msg notice" + (m.error ? " error" : ""));
    e.dataset.kind = m.kind || "";
    e.append(el("div", "content", m.text));
    if (m.retry) {
      const b = el("button", "retry", "Retry");
      b.type = "button";
      b.addEventListener("click", () => retry());
      e.append(b);
    }
    return e;
  }
  const e = el("div", "msg assistant");
  fillAssistant(e, m);
  return e;
}

// Fills (or refills, while streaming) an assistant message's element.
function fillAssistant(e, m) {
  e.dataset.state = m.state || "done";
  e.replaceChildren();
  if (m.reasoning) {
    const d = el("details", "reasoning");
    // Open while the model thinks, closed once it answers, unless the reader chose.
    const thinking = m.state === "streaming" && !m.content && !(m.tool_calls || []).length;
    d.open = m.reasoningOpen ?? thinking;
    const summary = el("summary", null, thinking ? "Thinking…" : "Reasoning");
    summary.addEventListener("click", () => (m.reasoningOpen = !d.open));
    d.append(summary);
    d.append(el("div", "reasoning-text", m.reasoning));
    e.append(d);
  }
  if (m.content) {
    const c = el("div", "content markdown");
    c.innerHTML = Markdown.render(m.content);
    e.append(c);
  }
  for (const call of m.tool_calls || []) {
    const t = el("div", "tool-call");
    t.append(el("span", "tool-label", "tool call"), el("span", "tool-name", call.name));
    let args = call.arguments;
    try {
      args = JSON.stringify(JSON.parse(call.arguments), null, 2);
    } catch (_) { /* still streaming, or not JSON: shown as sent */ }
    t.append(el("pre", "tool-args", args));
    e.append(t);
  }
  if (m.error) e.append(el("div", "reply-error", m.error));
  e.append(metaElement(m));
}

function metaElement(m) {
  const meta = el("div", "meta");
  const add = (k, text, title) => {
    const s = el("span", "meta-" + k, text);
    s.dataset.k = k;
    if (title) s.title = title;
    meta.append(s);
  };
  const x = m.meta || {};
  if (x.route) {
    let label = x.route === "cloud" ? "cloud" : "local";
    if (x.masked && x.masked.length) label += " · masked " + x.masked.join(", ");
    add("route", label, "where this reply was answered");
  }
  if (x.entities && x.entities.length) add("entities", "found: " + x.entities.join(", "), "private data the gate found");
  if (x.consented && x.consented.length) add("consented", "sent with consent: " + x.consented.join(", "));
  if (x.prompt_tokens !== undefined) {
    add("prompt", `prompt ${x.prompt_tokens} tok` + (x.cached_tokens ? ` (${x.cached_tokens} cached)` : ""));
  }
  if (x.completion_tokens !== undefined) add("completion", `${x.completion_tokens} tok`);
  if (x.ttft_ms !== undefined) add("ttft", `TTFT ${formatMs(x.ttft_ms)}`, "time to first token");
  if (x.decode_tps !== undefined) add("tps", `${x.decode_tps.toFixed(1)} tok/s`, "decode speed");
  if (m.state === "stopped") add("finish", "stopped");
  else if (x.finish && x.finish !== "stop") add("finish", x.finish === "length" ? "cut at max tokens" : x.finish);
  return meta;
}

const formatMs = (ms) => (ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`);

function setServerState(text, bad) {
  const s = $("server-state");
  s.textContent = text || "";
  s.classList.toggle("bad", !!bad);
}

function setRunning(on) {
  $("send").hidden = on;
  $("stop").hidden = !on;
  document.body.classList.toggle("running", on);
}

// ------------------------------------------------------------------ settings

function bindSettings() {
  const s = state.settings;
  const bind = (id, key, kind) => {
    const input = $(id);
    if (kind === "check") input.checked = !!s[key];
    else input.value = s[key] ?? "";
    const update = () => {
      s[key] = kind === "check" ? input.checked : input.value;
      if (key === "system" && current()) current().system = input.value;
      save();
    };
    input.addEventListener("input", update);
    input.addEventListener("change", update);
  };
  bind("thinking", "thinking", "check");
  bind("temperature", "temperature");
  bind("top-p", "topP");
  bind("max-tokens", "maxTokens");
  bind("tools", "tools");
  bind("api-key", "apiKey");
  bind("system", "system");
}

function authHeaders() {
  return state.settings.apiKey ? { Authorization: "Bearer " + state.settings.apiKey } : {};
}

async function loadModelInfo() {
  try {
    const r = await fetch("/v1/models", { headers: authHeaders() });
    if (r.status === 401) {
      $("model-info").textContent = "This server needs an API key (Settings → More).";
      return;
    }
    const models = (await r.json()).data;
    const m = models[0];
    state.model = m;
    // The base model first, then the LoRA adapters the server serves (shown only when there are any).
    const pick = $("model-pick");
    pick.replaceChildren(...models.map((x) => new Option(x.parent ? `${x.id} (LoRA adapter)` : x.id, x.id)));
    pick.hidden = models.length < 2;
    const parts = [m.id];
    if (m.precision) parts.push(m.precision);
    if (m.max_model_len) parts.push(`context ${m.max_model_len.toLocaleString("en-US")} tokens`);
    $("model-info").textContent = parts.join(" · ");
    setServerState("");
  } catch (e) {
    $("model-info").textContent = "solo";
    setServerState("The server cannot be reached: is solo serve running?", true);
  }
}

// ------------------------------------------------------------------ the request

// The conversation as the API wants it: system prompt, user and assistant turns (notices left out).
function apiMessages(conv) {
  const out = [];
  if (conv.system && conv.system.trim()) out.push({ role: "system", content: conv.system });
  for (const m of conv.messages) {
    if (m.role === "user" && (m.images || []).length) {
      const parts = m.images.map((url) => ({ type: "image_url", image_url: { url } }));
      if (m.content) parts.push({ type: "text", text: m.content });
      out.push({ role: "user", content: parts });
    } else if (m.role === "user") out.push({ role: "user", content: m.content });
    else if (m.role === "assistant" && (m.content || (m.tool_calls || []).length)) {
      const a = { role: "assistant", content: m.content || "" };
      if ((m.tool_calls || []).length) {
        a.tool_calls = m.tool_calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
      }
      out.push(a);
    }
  }
  return out;
}

function requestBody(conv) {
  const s = state.settings;
  const body = {
    messages: apiMessages(conv),
    stream: true,
    stream_options: { include_usage: true },
    chat_template_kwargs: { enable_thinking: !!s.thinking },
  };
  if (state.model) body.model = $("model-pick").value || state.model.id;
  const num = (v) => (v === "" || v === undefined || v === null ? undefined : Number(v));
  if (num(s.temperature) !== undefined) body.temperature = num(s.temperature);
  if (num(s.topP) !== undefined) body.top_p = num(s.topP);
  if (num(s.maxTokens) !== undefined) body.max_tokens = Math.round(num(s.maxTokens));
  if (s.tools && s.tools.trim()) body.tools = JSON.parse(s.tools);
  return body;
}

function addNotice(conv, text, opts = {}) {
  conv.messages.push({ role: "notice", text, error: opts.error !== false, kind: opts.kind, retry: !!opts.retry });
  save();
  if (conv.id === state.currentId) renderMessages();
}

// What a failed response means, in words; the conversation stays as it was.
async function explainFailure(res) {
  let body = null;
  try {
    body = await res.json();
  } catch (_) { /* not JSON */ }
  const err = (body && body.error) || {};
  const msg = err.message || res.statusText || "unknown error";
  const types = (err.entity_types || []).join(", ");
  switch (res.status) {
    case 400:
      return { kind: "bad-request", text: `The server could not take this request: ${msg}`, retry: true };
    case 401:
      return { kind: "auth", text: "This server needs an API key: enter it under Settings → More.", retry: true };
    case 403:
      return { kind: "refused", text: `Refused by the privacy policy: the message contains ${types || "data it does not allow"}. Nothing was sent; your message is back in the box.`, retry: false };
    case 503: {
      const after = res.headers.get("Retry-After");
      return { kind: "busy", text: `The server is busy (its queue is full).` + (after ? ` Try again in ${after} s.` : " Try again shortly."), retry: true };
    }
    default:
      return { kind: "http-" + res.status, text: `The server answered ${res.status}: ${msg}`, retry: true };
  }
}

function retry() {
  const conv = current();
  if (!conv || state.running) return;
  while (conv.messages.length && conv.messages[conv.messages.length - 1].role === "notice") conv.messages.pop();
  save();
  renderMessages();
  generate(conv, {});
}

async function send(text) {
  if (state.running || (!text.trim() && !pending.length)) return;
  const conv = current() || newConversation();
  conv.system = $("system").value;
  if (conv.messages.filter((m) => m.role === "user").length === 0) conv.title = text.trim().slice(0, 60) || "Image";
  const m = { role: "user", content: text };
  if (pending.length) m.images = pending.splice(0);
  renderAttachments();
  conv.messages.push(m);
  save();
  renderConversations();
  renderMessages();
  await generate(conv, {});
}

// A consent token is good for 10 minutes and its conversation (the server's rule); the page
// keeps it so the conversation's later turns, which repeat the consented values, pass too.
const CONSENT_MS = 9.5 * 60 * 1000;

async function generate(conv, extraHeaders) {
  const consent = conv.consent && Date.now() - conv.consent.at < CONSENT_MS ? conv.consent : null;
  if (consent && !extraHeaders["X-Solo-Route"]) extraHeaders = { "X-Solo-Consent": consent.token, ...extraHeaders };
  let body;
  try {
    body = requestBody(conv);
  } catch (e) {
    addNotice(conv, "The tools setting is not valid JSON: " + e.message, { kind: "settings" });
    return;
  }
  const controller = new AbortController();
  state.running = { controller, conv };
  setRunning(true);
  const started = performance.now();
  let res;
  try {
    res = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Solo-Conversation": conv.id, ...authHeaders(), ...extraHeaders },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
  } catch (e) {
    state.running = null;
    setRunning(false);
    if (e.name === "AbortError") return;
    addNotice(conv, "The server cannot be reached: is solo serve still running? Your conversation is kept; Retry sends it again.", { kind: "unreachable", retry: true });
    setServerState("The server cannot be reached.", true);
    return;
  }
  if (!res.ok) {
    state.running = null;
    setRunning(false);
    if (res.status === 428) return askConsent(conv, res);
    const f = await explainFailure(res);
    if (res.status === 403) takeBack(conv);
    addNotice(conv, f.text, { kind: f.kind, retry: f.retry });
    return;
  }
  setServerState("");
  const list = (h) => (res.headers.get(h) || "").split(",").map((s) => s.trim()).filter(Boolean);
  const reply = {
    role: "assistant", content: "", reasoning: "", tool_calls: [], state: "streaming",
    meta: { route: res.headers.get("X-Solo-Route") || undefined, entities: list("X-Solo-Entities"), masked: list("X-Solo-Masked") },
  };
  const sentWith = extraHeaders["X-Solo-Consent"] && conv.consent ? conv.consent.types : [];
  reply.meta.consented = sentWith.filter((t) => reply.meta.entities.includes(t));
  conv.messages.push(reply);
  const view = conv.id === state.currentId;
  if (view) renderMessages();
  const box = $("messages");
  const e = view ? box.lastElementChild : null;
  state.running.reply = reply;
  let pending = false;
  const repaint = () => {
    if (pending || !e) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
      fillAssistant(e, reply);
      if (atBottom) box.scrollTop = box.scrollHeight;
    });
  };
  let first = null, last = null;
  try {
    await readStream(res, (chunk) => {
      if (chunk.error) {
        reply.error = chunk.error.message || "The reply broke off.";
        return;
      }
      if (chunk.usage) {
        reply.meta.prompt_tokens = chunk.usage.prompt_tokens;
        reply.meta.completion_tokens = chunk.usage.completion_tokens;
        reply.meta.cached_tokens = (chunk.usage.prompt_tokens_details || {}).cached_tokens || 0;
      }
      const choice = (chunk.choices || [])[0];
      if (!choice) return;
      const d = choice.delta || {};
      const text = (d.reasoning_content || d.reasoning || "") + (d.content || "");
      if (text || d.tool_calls) {
        last = performance.now();
        if (first === null) first = last;
      }
      if (d.reasoning_content) reply.reasoning += d.reasoning_content;
      else if (d.reasoning) reply.reasoning += d.reasoning;
      if (d.content) reply.content += d.content;
      for (const t of d.tool_calls || []) {
        const i = t.index ?? reply.tool_calls.length;
        if (!reply.tool_calls[i]) reply.tool_calls[i] = { id: t.id || "", name: "", arguments: "" };
        const call = reply.tool_calls[i];
        if (t.id) call.id = t.id;
        if (t.function && t.function.name) call.name += t.function.name;
        if (t.function && t.function.arguments) call.arguments += t.function.arguments;
      }
      if (choice.finish_reason) reply.meta.finish = choice.finish_reason;
      repaint();
    });
    reply.state = reply.error ? "error" : "done";
  } catch (err) {
    if (err.name === "AbortError") reply.state = "stopped";
    else {
      reply.state = "error";
      reply.error = "The connection to the server broke off.";
    }
  }
  if (first !== null) reply.meta.ttft_ms = first - started;
  const n = reply.meta.completion_tokens;
  if (first !== null && last > first && n > 1) reply.meta.decode_tps = (n - 1) / ((last - first) / 1000);
  state.running = null;
  setRunning(false);
  save();
  if (e) {
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    fillAssistant(e, reply);
    if (atBottom) box.scrollTop = box.scrollHeight;
  }
  $("input").focus();
}

// Server-sent events out of a fetch body: calls `onEvent` with each JSON payload until [DONE].
async function readStream(res, onEvent) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
      if (!data) continue;
      if (data.trim() === "[DONE]") return;
      try {
        onEvent(JSON.parse(data));
      } catch (e) {
        if (!(e instanceof SyntaxError)) throw e;
      }
    }
  }
}

// 428 consent_required: a dialog naming the types; approving resends with the consent token.
async function askConsent(conv, res) {
  let err = {};
  try {
    err = (await res.json()).error || {};
  } catch (_) { /* keeps the defaults */ }
  const types = err.entity_types || [];
  const dialog = $("consent");
  $("consent-text").textContent =
    `This message contains ${types.join(", ") || "private data"} and would be sent to the cloud model. Send it there?`;
  dialog.returnValue = "cancel";
  dialog.showModal();
  const answer = await new Promise((resolve) => dialog.addEventListener("close", () => resolve(dialog.returnValue), { once: true }));
  if (answer === "cloud" && err.consent_token) {
    conv.consent = { token: err.consent_token, types, at: Date.now() };
    return generate(conv, { "X-Solo-Consent": err.consent_token });
  }
  if (answer === "local") return generate(conv, { "X-Solo-Route": "local" });
  takeBack(conv);
  addNotice(conv, "Not sent. Your message is back in the box: edit it, or send it again to choose.", { kind: "consent-declined", error: false });
}

// The last user message leaves the conversation (its later turns would carry it) and goes back
// into the message box.
function takeBack(conv) {
  const last = conv.messages[conv.messages.length - 1];
  if (!last || last.role !== "user") return;
  conv.messages.pop();
  const input = $("input");
  if (!input.value.trim()) input.value = last.content;
  save();
}

function stop() {
  if (state.running) state.running.controller.abort();
}

// ------------------------------------------------------------------ conversations

function switchTo(id) {
  if (state.running) stop();
  state.currentId = id;
  const conv = current();
  $("system").value = conv ? conv.system || "" : state.settings.system;
  save();
  renderConversations();
  renderMessages();
  $("input").focus();
}

function deleteConversation(id) {
  if (state.running && state.running.conv.id === id) stop();
  state.conversations = state.conversations.filter((c) => c.id !== id);
  if (state.currentId === id) state.currentId = state.conversations.length ? state.conversations[0].id : null;
  save();
  switchTo(state.currentId);
}

// ------------------------------------------------------------------ copying code

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch (_) {
    // Not a secure context (a shared --host), or no permission: the old way.
    const t = el("textarea");
    t.value = text;
    document.body.append(t);
    t.select();
    const ok = document.execCommand("copy");
    t.remove();
    return ok;
  }
}

// ------------------------------------------------------------------ images

// Images attached to the next message, as data: URLs (the server fetches nothing).
const pending = [];

function thumbnail(url) {
  const img = el("img", "thumb");
  img.src = url;
  img.alt = "attached image";
  return img;
}

function renderAttachments() {
  const box = $("attachments");
  box.replaceChildren();
  pending.forEach((url, i) => {
    const a = el("div", "attachment");
    a.append(thumbnail(url));
    const remove = el("button", "remove", "×");
    remove.type = "button";
    remove.title = "Remove this image";
    remove.addEventListener("click", () => {
      pending.splice(i, 1);
      renderAttachments();
    });
    a.append(remove);
    box.append(a);
  });
}

function attachFiles(files) {
  for (const f of files) {
    if (!/^image\/(png|jpeg|webp|gif)$/.test(f.type)) {
      setServerState(`${f.name || "The pasted file"} is not a PNG, JPEG, WebP or GIF image.`, true);
      continue;
    }
    const reader = new FileReader();
    reader.onload = () => {
      pending.push(reader.result);
      renderAttachments();
    };
    reader.readAsDataURL(f);
  }
}

// ------------------------------------------------------------------ start

function init() {
  load();
  bindSettings();
  if (current()) $("system").value = current().system || "";
  renderConversations();
  renderMessages();
  $("composer").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = $("input");
    const text = input.value;
    if ((!text.trim() && !pending.length) || state.running) return;
    input.value = "";
    send(text);
  });
  $("input").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      $("composer").requestSubmit();
    }
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && state.running && !$("consent").open) {
      ev.preventDefault();
      stop();
    }
  });
  $("stop").addEventListener("click", stop);
  $("attach").addEventListener("click", () => $("attach-file").click());
  $("attach-file").addEventListener("change", (ev) => {
    attachFiles(ev.target.files);
    ev.target.value = "";
  });
  $("input").addEventListener("paste", (ev) => {
    const files = [...(ev.clipboardData ? ev.clipboardData.files : [])];
    if (files.length) {
      ev.preventDefault();
      attachFiles(files);
    }
  });
  $("new-chat").addEventListener("click", () => {
    if (state.running) stop();
    newConversation();
    renderConversations();
    renderMessages();
    $("input").focus();
  });
  $("messages").addEventListener("click", async (ev) => {
    const button = ev.target.closest("button.copy");
    if (!button) return;
    const code = button.closest(".code").querySelector("code").textContent;
    button.textContent = (await copyText(code)) ? "Copied" : "Copy failed";
    setTimeout(() => (button.textContent = "Copy"), 1500);
  });
  loadModelInfo();
}

document.addEventListener("DOMContentLoaded", init);
