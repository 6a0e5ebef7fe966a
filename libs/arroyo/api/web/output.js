// A preview's output: the rows of its job's event stream (GET .../output) in a table the user
// can sort (a click on a column's head) and filter, with a count and a stop button. An
// updating query's rows come as change records (debezium's {before, after, op}): each is shown
// as a create, an update or a delete, or folded into the current result.

import { API, ApiError, $, h, hide, showError } from "./util.js";

const MAX_ROWS = 1000; // the newest are kept; the count says how many came
const RENDER_MS = 100; // rows arriving together are drawn together
const OPS = { c: "create", u: "update", d: "delete", r: "create" };
const CHANGE = "change"; // the column naming an updating row's kind

/** A change record ({before, after, op}), or null for a plain row. */
function asChange(row) {
  if (typeof row.op !== "string" || !(row.op in OPS)) return null;
  const keys = Object.keys(row);
  if (!keys.every((k) => k === "op" || k === "before" || k === "after" || k === "ts_ms")) {
    return null;
  }
  return { op: OPS[row.op], before: row.before || null, after: row.after || null };
}

const cell = (v) => (v == null ? "" : typeof v === "object" ? JSON.stringify(v) : String(v));

function compare(a, b) {
  if (typeof a === "number" && typeof b === "number") return a - b;
  if (a == null) return b == null ? 0 : -1;
  if (b == null) return 1;
  return cell(a).localeCompare(cell(b), undefined, { numeric: true });
}

/**
 * The output card's behaviour. `onStop` is called when the user stops the preview (it stops the
 * pipeline); `open(path)` starts reading the event stream at `path`; `close()` stops reading.
 * The card's listeners are removed when `signal` aborts.
 */
export function outputTable({ onStop, signal }) {
  const el = {
    card: $("output-card"), alert: $("output-alert"), state: $("output-state"),
    head: $("output-head"), body: $("output-rows"), count: $("output-count"),
    filter: $("output-filter"), mode: $("output-mode"), modeLabel: $("output-mode-label"),
    stop: $("output-stop"),
  };
  let source = null;
  let rows = []; // {seq, values, change}: the newest MAX_ROWS
  let received = 0;
  let columns = [];
  let updating = false;
  const result = new Map(); // an updating query's current rows: key -> {values, count}
  let sort = null; // {column, desc}
  let timer = null;

  function addColumns(values) {
    for (const key of Object.keys(values || {})) if (!columns.includes(key)) columns.push(key);
  }

  function fold(change) {
    const remove = (values) => {
      const key = JSON.stringify(values);
      const entry = result.get(key);
      if (entry && --entry.count === 0) result.delete(key);
    };
    if (change.op !== "create" && change.before) remove(change.before);
    if (change.op !== "delete" && change.after) {
      const key = JSON.stringify(change.after);
      const entry = result.get(key) || { values: change.after, count: 0 };
      entry.count += 1;
      result.set(key, entry);
    }
  }

  function add(row) {
    received += 1;
    const change = asChange(row);
    if (change) {
      updating = true;
      fold(change);
      const values = change.op === "delete" ? change.before : change.after;
      addColumns(values);
      rows.push({ seq: received, values: values || {}, change: change.op });
    } else {
      addColumns(row);
      rows.push({ seq: received, values: row, change: null });
    }
    if (rows.length > MAX_ROWS) rows = rows.slice(rows.length - MAX_ROWS);
    if (timer === null) timer = setTimeout(render, RENDER_MS);
  }

  /** The rows to show: the changes as they came, or the folded result; filtered, sorted. */
  function shown() {
    const showResult = updating && el.mode.value === "result";
    let list = showResult
      ? [...result.values()].flatMap((e, i) => Array.from({ length: e.count },
        () => ({ seq: i, values: e.values, change: null })))
      : rows.slice();
    const needle = el.filter.value.trim().toLowerCase();
    if (needle) {
      list = list.filter((r) => (r.change || "").includes(needle)
        || columns.some((c) => cell(r.values[c]).toLowerCase().includes(needle)));
    }
    if (sort) {
      const key = (r) => (sort.column === CHANGE ? r.change : r.values[sort.column]);
      list.sort((a, b) => compare(key(a), key(b)) * (sort.desc ? -1 : 1) || a.seq - b.seq);
    }
    return { list, showResult };
  }

  function render() {
    clearTimeout(timer);
    timer = null;
    const { list, showResult } = shown();
    const names = updating && !showResult ? [CHANGE, ...columns] : columns;
    el.head.replaceChildren(...names.map((name) => {
      const mark = sort && sort.column === name ? (sort.desc ? " ▼" : " ▲") : "";
      const order = sort && sort.column === name
        ? (sort.desc ? "descending" : "ascending")
        : "none";
      return h("th", { "aria-sort": order },
        h("button", { type: "button", class: "sort", onclick: () => toggleSort(name) },
          name, mark));
    }));
    el.body.replaceChildren(...list.map((r) => h("tr", { class: r.change ? `op-${r.change}` : null },
      names.map((name) => (name === CHANGE
        ? h("td", {}, h("span", { class: `op op-${r.change}` }, r.change))
        : h("td", {}, cell(r.values[name])))))));
    el.modeLabel.hidden = !updating;
    const kept = showResult ? `${result.size} distinct row(s) now` : `${rows.length} kept`;
    const matching = el.filter.value.trim() ? ` · ${list.length} match the filter` : "";
    el.count.textContent = `${received} row(s) received · ${kept}${matching}`;
  }

  function toggleSort(column) {
    if (!sort || sort.column !== column) sort = { column, desc: false };
    else if (!sort.desc) sort = { column, desc: true };
    else sort = null;
    render();
  }

  function finish(text) {
    if (source) source.close();
    source = null;
    el.state.textContent = text;
    el.stop.disabled = true;
  }

  function onError(path, event) {
    if (event.data !== undefined) { // the API's own `event: error`
      let message = event.data;
      try {
        message = JSON.parse(event.data).error || message;
      } catch {
        // not JSON: show it as it is
      }
      finish("failed");
      showError(el.alert, "The output stream failed", new ApiError(200, message, null));
    } else if (source && source.readyState === EventSource.CLOSED) {
      finish("disconnected");
      explainFailure(path, el.alert);
    } else {
      el.state.textContent = "reconnecting…";
    }
  }

  el.filter.addEventListener("input", render, { signal });
  el.mode.addEventListener("change", render, { signal });
  el.stop.addEventListener("click", async () => {
    el.stop.disabled = true;
    try {
      await onStop();
      finish("stopped");
    } catch (err) {
      el.stop.disabled = false;
      showError(el.alert, "Could not stop the preview", err);
    }
  }, { signal });

  return {
    open(path) {
      this.close();
      rows = [];
      columns = [];
      received = 0;
      updating = false;
      result.clear();
      sort = null;
      el.filter.value = "";
      el.mode.value = "changes";
      hide(el.alert);
      el.card.hidden = false;
      el.count.hidden = false;
      el.stop.disabled = false;
      el.state.textContent = "connecting…";
      render();
      source = new EventSource(API + path);
      source.addEventListener("open", () => {
        hide(el.alert);
        el.state.textContent = "streaming";
      });
      source.addEventListener("message", (event) => {
        let row;
        try {
          row = JSON.parse(event.data);
        } catch {
          row = { value: event.data };
        }
        add(row !== null && typeof row === "object" ? row : { value: row });
      });
      source.addEventListener("done", () => {
        render();
        finish("done");
      });
      source.addEventListener("error", (event) => onError(path, event));
    },
    close() {
      if (source) source.close();
      source = null;
      clearTimeout(timer);
      timer = null;
    },
  };
}

/** EventSource hides a refused stream's answer: ask again with fetch to show the API's error. */
async function explainFailure(path, alert) {
  const abort = new AbortController();
  try {
    const response = await fetch(API + path, { signal: abort.signal });
    if (response.ok) throw new ApiError(0, "the connection was lost; reload to reconnect", null);
    const body = await response.json().catch(() => ({}));
    const message = body.error || response.statusText;
    throw new ApiError(response.status, `${message} (HTTP ${response.status})`, body);
  } catch (err) {
    showError(alert, "The output stream failed", err instanceof ApiError
      ? err
      : new ApiError(0, `cannot reach the API (${err.message})`, null));
  } finally {
    abort.abort();
  }
}
