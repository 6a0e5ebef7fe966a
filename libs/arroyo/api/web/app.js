// Arroyo's web UI: ES modules over the REST API (/api/v1), no build step; its libraries are
// bundled into vendor/ by scripts/vendor-web (committed).
// Routes (in the URL's hash): #/ lists the pipelines and creates one; #/pipelines/<id> shows one;
// #/udfs lists the saved UDFs and saves one (udfs.js); #/connections the saved connection
// profiles and tables, with a wizard that saves one (connections.js).
// Every failed API call is shown in the nearest role="alert" element, never dropped.

import { renderCharts } from "./charts.js";
import { connectionsView, renderConnectionsAside } from "./connections.js";
import { sqlEditor } from "./editor.js";
import { latestMetrics, renderGraph } from "./graph.js";
import { udfsView } from "./udfs.js";
import { EXAMPLES } from "./examples.js";
import {
  $, API, ApiError, POLL_MS, api, badge, fmtBytes, fmtDuration, fmtNumber, fmtTime, h, hide,
  poller, renderIfChanged, showError, showText,
} from "./util.js";

const MAX_OUTPUT_ROWS = 500;

// ---- #/ : the list and the form

let refreshList = () => {};

function listView() {
  $("list-view").hidden = false;
  renderConnectionsAside($("connections-aside"), editor);
  const poll = poller(async (stopped) => {
    try {
      const page = await api("GET", "/pipelines?limit=100");
      if (stopped()) return;
      hide($("list-alert"));
      renderIfChanged($("pipelines"), page.data, (pipelines) => pipelines.map((p) =>
        h("tr", {},
          h("td", {},
            h("a", { href: `#/pipelines/${encodeURIComponent(p.id)}` }, p.name),
            p.preview && h("span", { class: "tag" }, "preview")),
          h("td", {}, badge(p)),
          h("td", { class: "muted" }, fmtTime(p.created_at)))));
      $("list-empty").hidden = page.data.length > 0;
      $("list-more").hidden = !page.has_more;
    } catch (err) {
      if (!stopped()) showError($("list-alert"), "Could not list the pipelines", err);
    }
  });
  refreshList = poll.now;
  return {
    stop() {
      poll.stop();
      refreshList = () => {};
    },
  };
}

const form = $("new-form");
const field = (name) => form.elements.namedItem(name);

function resetFormOutput() {
  for (const id of ["form-alert", "form-status", "diagnostics", "warnings", "form-graph"]) {
    hide($(id));
  }
}

function setFormBusy(busy) {
  for (const button of form.querySelectorAll("button")) button.disabled = busy;
}

const editor = sqlEditor($("sql-editor"), {
  label: "SQL",
  hint: "CREATE TABLE ... ; INSERT INTO ... SELECT ...",
  validate: (query) => api("POST", "/pipelines/validate_query", { query }),
  onPreview: () => $("preview").click(),
  onLaunch: () => form.requestSubmit(),
  // Validation as one types speaks in its own line; the buttons' results stay as they were.
  onValidated: (result, err) => {
    const live = $("live-status");
    live.hidden = false;
    if (err) {
      live.className = "small bad";
      live.textContent = `Could not validate: ${err.message}`;
    } else if (result.errors.length) {
      live.className = "small bad";
      live.textContent = `${result.errors.length} problem(s): hover the underlined text.`;
    } else {
      live.className = "small ok";
      live.textContent = "Valid.";
    }
  },
});
const jumpTo = (line, column) => editor.jumpTo(line, column);
api("GET", "/connectors").then((list) => editor.setConnectors(list.data), () => {});
for (const [name, query] of Object.entries(EXAMPLES)) {
  $("examples").append(h("option", { value: name }, name));
}
$("examples").addEventListener("change", (event) => {
  const query = EXAMPLES[event.target.value];
  if (query) editor.setText(query);
  event.target.value = "";
});

function renderDiagnostics(diagnostics) {
  if (!diagnostics || diagnostics.length === 0) return;
  showText($("diagnostics"), ...diagnostics.map((d) => h("li", {},
    d.line == null
      ? h("span", { class: "loc" }, "—")
      : h("button", {
        type: "button", class: "loc", title: "Show in the query",
        onclick: () => jumpTo(d.line, d.column),
      }, `${d.line}:${d.column ?? 1}`),
    h("span", { class: "message" }, d.message),
    h("code", { class: "muted" }, d.code))));
}

async function runForm(what, call) {
  resetFormOutput();
  setFormBusy(true);
  try {
    await call();
  } catch (err) {
    showError($("form-alert"), what, err);
    if (err instanceof ApiError && err.body && err.body.diagnostics) {
      renderDiagnostics(err.body.diagnostics);
    }
  } finally {
    setFormBusy(false);
  }
}

function showValidation(result) {
  renderDiagnostics(result.errors);
  if (result.warnings.length) {
    showText($("warnings"), ...result.warnings.map((w) => h("li", {}, w)));
  }
  if (result.errors.length === 0) {
    const sources = result.graph.nodes.filter((n) => n.kind === "source").length;
    const sinks = result.graph.nodes.filter((n) => n.kind === "sink").length;
    showText($("form-status"), `The query is valid: ${sources} source(s), ${sinks} sink(s).`);
    renderGraph($("form-graph"), result.graph);
  }
}

$("validate").addEventListener("click", () => runForm("Could not validate", async () => {
  showValidation(await api("POST", "/pipelines/validate_query", { query: editor.text() }));
}));

form.addEventListener("submit", (event) => {
  event.preventDefault();
  runForm("Could not create the pipeline", async () => {
    const body = { name: field("name").value, query: editor.text() };
    const parallelism = field("parallelism").value.trim();
    if (parallelism !== "") body.parallelism = Number(parallelism);
    const created = await api("POST", "/pipelines", body);
    showText($("form-status"), "Created ",
      h("a", { href: `#/pipelines/${encodeURIComponent(created.id)}` }, created.name), ".");
    field("name").value = "";
    refreshList();
  });
});

$("preview").addEventListener("click", () => runForm("Could not start a preview", async () => {
  const created = await api("POST", "/pipelines/preview", { query: editor.text() });
  location.hash = `#/pipelines/${encodeURIComponent(created.id)}`;
}));

// ---- #/pipelines/<id> : one pipeline

const ACTIONS = {
  stop: ["PATCH", "", { stop: "checkpoint" }, "Stop with a final checkpoint requested."],
  "stop-now": ["PATCH", "", { stop: "immediate" }, "Immediate stop requested."],
  start: ["PATCH", "", { stop: "none" }, "Start requested."],
  restart: ["POST", "/restart", {}, "Restart requested."],
};

// What is asked before an action that loses work in flight or the pipeline itself.
const CONFIRM = {
  "stop-now": (name) => `Stop ${name} now, without a final checkpoint?`,
  restart: (name) => `Restart ${name} from its last checkpoint?`,
  delete: (name) => `Delete pipeline ${name} with its checkpoints and errors?`,
};

let detail = null; // the pipeline shown: { id, pipeline, busy, poll }

function renderPipeline(p) {
  detail.pipeline = p;
  $("d-name").textContent = p.name;
  $("d-state").replaceWith(Object.assign(badge(p), { id: "d-state" }));
  $("d-id").textContent = p.id;
  $("d-job").textContent = p.job_id;
  $("d-stop").textContent = p.stop;
  $("d-parallelism").textContent = p.parallelism;
  const settings = $("settings-form");
  if (!settings.contains(document.activeElement) && settings.dataset.for !== p.id) {
    // Filled once per pipeline shown: a refresh never overwrites what the user is typing.
    settings.dataset.for = p.id;
    settings.elements.namedItem("parallelism").value = p.parallelism;
    settings.elements.namedItem("interval").value = p.checkpoint_interval_micros / 1e6;
  }
  $("d-created").textContent = fmtTime(p.created_at);
  if ($("d-query").textContent !== p.query) {
    $("d-query").textContent = p.query;
    drawGraph();
  }
  if (p.failure_message) showText($("d-failure"), h("strong", {}, "Failure: "), p.failure_message);
  else hide($("d-failure"));
  // The API says what can be asked of the job now; Restart and Delete always may be tried.
  const stoppable = p.action === "stop";
  const allowed = { stop: stoppable, "stop-now": stoppable, start: p.action === "start" };
  for (const button of document.querySelectorAll("#detail-view [data-action]")) {
    button.disabled = detail.busy || allowed[button.dataset.action] === false;
  }
}

/** The pipeline's graph, with each operator's latest metrics once the job reports them. */
function drawGraph() {
  if (!detail || !detail.pipeline) return;
  renderGraph($("d-graph"), detail.pipeline.graph, {
    metrics: detail.operators,
    selected: detail.selected,
    onSelect: (node) => {
      detail.selected = node.id;
      drawGraph();
    },
  });
  renderNode();
}

const METRIC_NAMES = {
  messages_recv: "rows in / s",
  messages_sent: "rows out / s",
  backpressure: "backpressure",
  state_rows: "state rows",
  state_bytes: "state bytes",
  state_rows_updated: "state rows updated",
  late_rows_dropped: "late rows dropped",
  deserialization_errors: "bad records dropped",
};

/** The selected node: its metrics over the controller's window, newest and highest. */
function renderNode() {
  const panel = $("d-node");
  const id = detail && detail.selected;
  if (!id) {
    renderCharts($("d-charts"), null, METRIC_NAMES);
    panel.hidden = true;
    return;
  }
  panel.hidden = false;
  const group = (detail.groups || []).find((o) => o.operatorId === id);
  const rows = group ? group.metricGroups.map((g) => {
    const points = g.subtasks.flatMap((t) => t.metrics);
    const values = points.map((p) => p.value);
    return h("tr", { "data-metric": g.name },
      h("th", {}, METRIC_NAMES[g.name] || g.name),
      h("td", { class: "num" }, values.length ? fmtNumber(values[values.length - 1]) : "—"),
      h("td", { class: "num" }, values.length ? fmtNumber(Math.max(...values)) : "—"),
      h("td", { class: "num" }, String(points.length)));
  }) : [];
  renderCharts($("d-charts"), group, METRIC_NAMES);
  showText($("d-node-info"),
    h("h3", {}, id, " ", h("button", {
      type: "button", class: "link", onclick: () => { detail.selected = null; drawGraph(); },
    }, "close")),
    rows.length
      ? h("table", { class: "table" },
        h("thead", {}, h("tr", {}, h("th", {}, "metric"), h("th", {}, "now"),
          h("th", {}, "highest"), h("th", {}, "points"))),
        h("tbody", {}, ...rows))
      : h("p", { class: "muted" }, "No metrics yet: the job reports them as it runs."));
}

function renderJob(job) {
  $("d-generation").textContent = job ? job.generation : "—";
  $("d-restarts").textContent = job ? job.restarts : "—";
}

function renderMetrics(metrics) {
  const latest = metrics.samples[metrics.samples.length - 1];
  $("metrics-table").hidden = !latest;
  $("metrics-empty").hidden = Boolean(latest);
  $("metrics").replaceChildren(...(latest ? latest.operators : []).map((o) => h("tr", {},
    h("td", {}, o.query),
    h("td", { title: `input: ${fmtNumber(o.rows_in_per_second)} rows/s` },
      fmtNumber(o.rows_processed_per_second)),
    h("td", {}, fmtDuration(o.batch_duration_micros)),
    h("td", {}, o.state_rows < 0 ? "—" : fmtNumber(o.state_rows)),
    h("td", {}, fmtBytes(o.state_bytes)),
    h("td", {}, fmtTime(o.watermark_micros)))));
}

function renderCheckpoints(list) {
  $("checkpoints-table").hidden = list.data.length === 0;
  $("checkpoints-empty").hidden = list.data.length > 0;
  renderIfChanged($("checkpoints"), list.data, (data) => data.map((c) => h("tr", {},
    h("td", {}, c.epoch),
    h("td", {}, c.query),
    h("td", {}, fmtTime(c.watermark_micros)),
    h("td", {}, fmtNumber(c.rows_in)),
    h("td", {}, fmtDuration(c.duration_micros)),
    h("td", { class: "muted" }, fmtTime(c.finished_at)))));
}

function renderErrors(list) {
  $("errors-empty").hidden = list.data.length > 0;
  renderIfChanged($("errors"), list.data, (data) => data.map((e) => h("li", {},
    h("div", { class: "muted small" },
      `${fmtTime(e.created_at)} · ${e.domain} · generation ${e.generation}`,
      e.retryable ? " · retryable" : ""),
    h("div", {}, e.message),
    e.details && h("details", {},
      h("summary", {}, "Details"),
      h("pre", { class: "code" }, e.details)))));
}

/** The job's output rows as they come, read with EventSource from the API's event stream. */
function openOutput(path) {
  const alert = $("output-alert");
  const state = $("output-state");
  const head = $("output-head");
  const rows = $("output-rows");
  const columns = [];
  let count = 0;
  $("output-card").hidden = false;
  state.textContent = "connecting…";
  const source = new EventSource(API + path);
  source.addEventListener("open", () => {
    hide(alert);
    state.textContent = "streaming";
  });
  source.addEventListener("message", (event) => {
    let row;
    try {
      row = JSON.parse(event.data);
    } catch {
      row = { value: event.data };
    }
    if (row === null || typeof row !== "object") row = { value: row };
    for (const key of Object.keys(row)) {
      if (!columns.includes(key)) {
        columns.push(key);
        head.append(h("th", {}, key));
      }
    }
    rows.append(h("tr", {}, columns.map((c) => {
      const v = row[c];
      return h("td", {}, v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : v);
    })));
    while (rows.childElementCount > MAX_OUTPUT_ROWS) rows.firstElementChild.remove();
    count += 1;
    state.textContent = `streaming · ${count} row(s)`;
  });
  source.addEventListener("done", () => {
    source.close();
    state.textContent = `done · ${count} row(s)`;
  });
  source.addEventListener("error", (event) => {
    if (event.data !== undefined) { // the API's own `event: error`
      let message = event.data;
      try {
        message = JSON.parse(event.data).error || message;
      } catch {
        // not JSON: show it as it is
      }
      source.close();
      state.textContent = "failed";
      showError(alert, "The output stream failed", new ApiError(200, message, null));
    } else if (source.readyState === EventSource.CLOSED) {
      state.textContent = "disconnected";
      explainOutputFailure(path, alert);
    } else {
      state.textContent = "reconnecting…";
    }
  });
  return source;
}

/** EventSource hides a refused stream's answer: ask again with fetch to show the API's error. */
async function explainOutputFailure(path, alert) {
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

/** Empties the detail view, so nothing of the last pipeline shown lingers. */
function resetDetail() {
  const root = $("detail-view");
  renderCharts($("d-charts"), null, {});
  delete $("settings-form").dataset.for;
  $("d-node").hidden = true;
  for (const el of root.querySelectorAll("[role=alert], [role=status], #d-graph, #d-failure")) {
    hide(el);
  }
  for (const el of root.querySelectorAll("dd, h1, pre, tbody, #output-head, #errors")) {
    el.replaceChildren();
    delete el.dataset.key;
  }
  for (const el of root.querySelectorAll("#output-card, table[id], p.muted")) el.hidden = true;
  $("d-state").textContent = "";
  $("output-state").textContent = "";
}

function detailView(id) {
  resetDetail();
  $("detail-view").hidden = false;
  const base = `/pipelines/${encodeURIComponent(id)}`;
  // version: bumped by every action, so a refresh that started before one is not shown.
  const current = {
    id, pipeline: null, busy: false, poll: null, output: null, version: 0,
    // operator_metric_groups: as served, the newest of each, and the node shown.
    groups: null, operators: null, selected: null,
  };
  detail = current;
  const section = async (alertId, what, path, render, stopped) => {
    try {
      const data = await api("GET", path);
      if (stopped()) return;
      hide($(alertId));
      render(data);
    } catch (err) {
      if (!stopped()) showError($(alertId), what, err);
    }
  };
  current.poll = poller(async (stopped) => {
    const version = current.version;
    let pipeline, jobs;
    try {
      [pipeline, jobs] = await Promise.all([api("GET", base), api("GET", `${base}/jobs`)]);
    } catch (err) {
      if (!stopped()) showError($("load-alert"), "Could not load the pipeline", err);
      return;
    }
    if (stopped() || version !== current.version) return;
    hide($("load-alert"));
    renderPipeline(pipeline);
    renderJob(jobs.data.find((j) => j.id === pipeline.job_id));
    const job = `${base}/jobs/${encodeURIComponent(pipeline.job_id)}`;
    if (pipeline.preview && !current.output) current.output = openOutput(`${job}/output`);
    await Promise.all([
      section("metrics-alert", "Could not load the metrics", `${job}/metrics`, renderMetrics,
        stopped),
      section("metrics-alert", "Could not load the operators' metrics",
        `${job}/operator_metric_groups`, (groups) => {
          current.groups = groups.data;
          current.operators = latestMetrics(groups.data);
          drawGraph();
        }, stopped),
      section("checkpoints-alert", "Could not load the checkpoints", `${job}/checkpoints?limit=50`,
        renderCheckpoints, stopped),
      section("errors-alert", "Could not load the errors", `${job}/errors?limit=50`, renderErrors,
        stopped),
    ]);
  });
  return {
    stop() {
      current.poll.stop();
      if (current.output) current.output.close();
      if (detail === current) detail = null;
    },
  };
}

async function act(action) {
  const current = detail;
  if (!current || current.busy) return;
  const name = current.pipeline ? current.pipeline.name : current.id;
  const path = `/pipelines/${encodeURIComponent(current.id)}`;
  const question = CONFIRM[action];
  if (question && !confirm(question(name))) return;
  hide($("detail-alert"));
  hide($("detail-status"));
  current.busy = true;
  current.version += 1;
  if (current.pipeline) renderPipeline(current.pipeline);
  try {
    if (action === "delete") {
      await api("DELETE", path);
      view.stop(); // now: the hash changes (and the view with it) only after this task
      navigate("#/", `Deleted pipeline ${name}.`);
      return;
    }
    const [method, suffix, body, done] = ACTIONS[action];
    const pipeline = await api(method, path + suffix, body);
    if (detail !== current) return;
    current.pipeline = pipeline;
    showText($("detail-status"), done);
  } catch (err) {
    if (detail !== current) return;
    showError($("detail-alert"), `Could not ${action.replace("-", " ")} ${name}`, err);
  } finally {
    current.busy = false;
    if (detail === current) {
      if (current.pipeline) renderPipeline(current.pipeline);
      current.poll.now();
    }
  }
}

for (const button of document.querySelectorAll("#detail-view [data-action]")) {
  button.addEventListener("click", () => act(button.dataset.action));
}

// ---- the cluster's readiness: a banner while GET /status says it is not ready

// Once ready, the status is still looked at now and then, to say so if a service goes away.
const READY_POLL_MS = 15000;

async function watchReadiness() {
  const banner = $("cluster-banner");
  let ready = false;
  try {
    const status = await api("GET", "/status");
    ready = status.ready;
    const waiting = Object.entries(status.services).filter(([, svc]) => svc.state !== "ready");
    const why = waiting
      .map(([name, svc]) => `${name} ${svc.state}${svc.detail ? ` (${svc.detail})` : ""}`)
      .join("; ");
    if (ready) hide(banner);
    else if (waiting.some(([, svc]) => svc.state === "unavailable")) {
      showText(banner, `Not ready: ${why}.`);
    } else {
      showText(banner, `Arroyo is starting: ${why}. A pipeline created now waits for it.`);
    }
  } catch (err) {
    showText(banner, `Not ready: ${err.message}.`);
  }
  banner.dataset.ready = String(ready);
  setTimeout(watchReadiness, ready ? READY_POLL_MS : POLL_MS);
}

// ---- routing

let view = null;

function navigate(hash, flash) {
  pendingFlash = flash;
  if (location.hash === hash) route();
  else location.hash = hash;
}

let pendingFlash = null;

function route() {
  if (view) view.stop();
  view = null;
  $("list-view").hidden = true;
  $("detail-view").hidden = true;
  hide($("route-alert"));
  if (pendingFlash) showText($("flash"), pendingFlash);
  else hide($("flash"));
  pendingFlash = null;
  const path = location.hash.replace(/^#/, "") || "/";
  const match = path.match(/^\/pipelines\/([^/]+)$/);
  if (path === "/") view = listView();
  else if (path === "/udfs") view = udfsView();
  else if (path === "/connections") view = connectionsView();
  else if (match) view = detailView(decodeURIComponent(match[1]));
  else {
    showText($("route-alert"), `There is no page ${path}: see `,
      h("a", { href: "#/" }, "the pipelines"), ".");
  }
}

window.addEventListener("hashchange", route);
route();
watchReadiness();

// ---- the pipeline's settings: a new parallelism or checkpoint interval restarts its job from
// its last checkpoint with them (PATCH /pipelines/{id}).

$("settings-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const current = detail;
  if (!current || !current.pipeline) return;
  const form = event.target;
  const parallelism = Number(form.elements.namedItem("parallelism").value);
  const seconds = Number(form.elements.namedItem("interval").value);
  const name = current.pipeline.name;
  if (!confirm(`Apply the settings to ${name}? A running job restarts from its checkpoint.`)) {
    return;
  }
  hide($("settings-alert"));
  try {
    const pipeline = await api("PATCH", `/pipelines/${encodeURIComponent(current.id)}`, {
      parallelism, checkpoint_interval_micros: Math.round(seconds * 1e6),
    });
    if (detail !== current) return;
    renderPipeline(pipeline);
    showText($("detail-status"), `Settings applied: parallelism ${pipeline.parallelism}, `
      + `a checkpoint every ${pipeline.checkpoint_interval_micros / 1e6} s.`);
    current.poll.now();
  } catch (err) {
    showError($("settings-alert"), "Could not apply the settings", err);
  }
});

