// What every page of the UI uses: DOM helpers (text goes in as text: nothing the API returns is
// parsed as HTML), formatting, the API client, and polling.

export const API = "/api/v1";
// The event an API call that needs a key sends (on window).
export const UNAUTHORIZED = "arroyo:unauthorized";
export const POLL_MS = 2000;

export const $ = (id) => document.getElementById(id);

// ---- DOM helpers (text goes in as text: nothing the API returns is parsed as HTML)

export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

export function s(tag, attrs, ...children) {
  return build(document.createElementNS("http://www.w3.org/2000/svg", tag), attrs, children);
}

export function build(el, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) {
      el.append(child instanceof Node ? child : String(child));
    }
  }
  return el;
}

/** Replace el's children with render(data)'s, unless data is what el shows already (so that
 * polling neither resets open <details> nor a selection). */
export function renderIfChanged(el, data, render) {
  const key = JSON.stringify(data);
  if (el.dataset.key === key) return;
  el.dataset.key = key;
  el.replaceChildren(...render(data));
}

export function showError(el, what, err) {
  el.textContent = `${what}: ${err.message}`;
  el.hidden = false;
  if (!(err instanceof ApiError)) console.error(err); // a bug of ours: make it loud
}

export function showText(el, ...content) {
  el.replaceChildren(...content);
  el.hidden = false;
}

/** What an editor's last validation found, in its status line `el`; `valid()`: the words
 * for a text without problems. */
export function showValidity(el, result, err, valid) {
  el.hidden = false;
  const problems = err ? 0 : result.errors.length;
  el.className = err || problems ? "small bad" : "small ok";
  el.textContent = err
    ? `Could not validate: ${err.message}`
    : problems ? `${problems} problem(s): hover the underlined text.` : valid();
}

export function hide(el) {
  el.hidden = true;
  el.replaceChildren();
}

// ---- formatting

export const fmtTime = (micros) => (micros == null ? "—" : new Date(micros / 1000).toLocaleString());
export const fmtNumber = (n) => n.toLocaleString(undefined, { maximumFractionDigits: 1 });

export function fmtDuration(micros) {
  const ms = micros / 1000;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

export function fmtBytes(bytes) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (bytes >= 1024 && i < units.length - 1) {
    bytes /= 1024;
    i += 1;
  }
  return `${i ? bytes.toFixed(1) : bytes} ${units[i]}`;
}

export function stateClass(state) {
  if (state === "Running") return "good";
  if (state === "Failed" || state === "Failing") return "bad";
  if (state === "Stopped" || state === "Finished") return "idle";
  return "busy";
}

export function badge(pipeline) {
  const note = pipeline.action_in_progress
    ? pipeline.action === "stop" ? " · stopping" : " · starting"
    : "";
  return h("span", { class: `badge ${stateClass(pipeline.state)}` }, pipeline.state + note);
}

// ---- the API

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

/** The JSON answer of a call, or an ApiError with the API's {"error"} message. */
export async function api(method, path, body) {
  const init = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(API + path, init);
  } catch (err) {
    throw new ApiError(0, `cannot reach the API (${err.message})`, null);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const message = data && typeof data.error === "string"
      ? data.error
      : `${response.status} ${response.statusText}`;
    // No key, or one refused: the sign-in (signin.js) asks for one.
    if (response.status === 401) {
      window.dispatchEvent(new CustomEvent(UNAUTHORIZED, { detail: message }));
    }
    throw new ApiError(response.status, `${message} (HTTP ${response.status})`, data);
  }
  if (data === null && response.status !== 204) {
    throw new ApiError(response.status, `${method} ${path} answered with no JSON`, null);
  }
  return data;
}

/** Runs fn now and POLL_MS after each run, until stop(); now() runs it again at once and
 * returns a promise settled when a run that began after the call has ended (at once if the
 * poller is stopped). fn gets a function telling whether the poller was stopped meanwhile (the
 * user went elsewhere). */
export function poller(fn) {
  let stopped = false;
  let running = false;
  let again = false;
  let timer = null;
  let waiting = []; // resolvers of now() calls, settled by the next run to start
  let served = []; // resolvers the run in flight settles when it ends (stop() settles them at once)
  const stoppedNow = () => stopped;
  const settle = (list) => { for (const resolve of list) resolve(); };
  async function tick() {
    clearTimeout(timer);
    timer = null;
    if (stopped) {
      settle(waiting.splice(0));
      return;
    }
    if (running) {
      again = true;
      return;
    }
    running = true;
    served = waiting.splice(0);
    try {
      await fn(stoppedNow);
    } catch (err) {
      console.error(err);
    } finally {
      running = false;
      settle(served.splice(0));
    }
    if (stopped) {
      settle(waiting.splice(0));
      return;
    }
    if (again) {
      again = false;
      tick();
    } else {
      timer = setTimeout(tick, POLL_MS);
    }
  }
  tick();
  return {
    now() {
      const done = new Promise((resolve) => waiting.push(resolve));
      tick();
      return done;
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
      settle(waiting.splice(0));
      settle(served.splice(0));
    },
  };
}

// ---- the dataflow graph: sources on the left, sinks on the right
