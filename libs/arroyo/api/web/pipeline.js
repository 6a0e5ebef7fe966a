// /pipelines/<id>: one pipeline, its job, graph, metrics, checkpoints and errors, its actions
// (stop, start, restart, delete, each asked first where it loses work) and its settings.
// Everything the view holds lives in detailView's closure; its listeners go with it.

import { renderCharts } from "./charts.js";
import { checkpointsView } from "./checkpoints.js";
import { latestMetrics, renderGraph } from "./graph.js";
import { outputTable } from "./output.js";
import {
  $, api, badge, fmtBytes, fmtDuration, fmtNumber, fmtTime, h, hide, poller, renderIfChanged,
  showError, showText,
} from "./util.js";

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

const METRIC_NAMES = {
  messages_recv: "rows in / s",
  messages_sent: "rows out / s",
  backpressure: "backpressure",
  state_rows: "state rows",
  state_bytes: "state bytes",
  state_rows_updated: "state rows updated",
  late_rows_dropped: "late rows dropped",
  deserialization_errors: "bad records dropped",
  batch_duration: "batch duration (s)",
  watermark_lag: "watermark lag (s)",
};

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
  for (const el of root.querySelectorAll("#output-card, #checkpoints-list, table[id], p.muted")) {
    el.hidden = true;
  }
  $("d-state").textContent = "";
  $("output-state").textContent = "";
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

/** Shows pipeline `id`; `navigate(path, flash)` goes elsewhere (after a delete). */
export function detailView(id, { navigate }) {
  resetDetail();
  $("detail-view").hidden = false;
  showText($("detail-loading"), "Loading the pipeline…");
  const listeners = new AbortController();
  const on = (el, type, fn) => el.addEventListener(type, fn, { signal: listeners.signal });
  const base = `/pipelines/${encodeURIComponent(id)}`;
  // version: bumped by every action, so a refresh that started before one is not shown.
  const current = {
    pipeline: null, busy: false, version: 0, stopped: false,
    // operator_metric_groups: as served, the newest of each, and the node shown.
    groups: null, operators: null, selected: null,
  };
  const output = outputTable({
    onStop: () => api("PATCH", base, { stop: "immediate" }), signal: listeners.signal,
  });
  let outputOpen = false;
  const checkpoints = checkpointsView({
    charts: $("checkpoint-charts"), list: $("checkpoints"), table: $("checkpoints-list"),
    empty: $("checkpoints-empty"),
  });

  function renderPipeline(p) {
    current.pipeline = p;
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
    if (p.failure_message) {
      showText($("d-failure"), h("strong", {}, "Failure: "), p.failure_message);
    } else hide($("d-failure"));
    // The API says what can be asked of the job now; Restart and Delete always may be tried.
    const stoppable = p.action === "stop";
    const allowed = { stop: stoppable, "stop-now": stoppable, start: p.action === "start" };
    for (const button of document.querySelectorAll("#detail-view [data-action]")) {
      button.disabled = current.busy || allowed[button.dataset.action] === false;
    }
  }

  /** The pipeline's graph, with each operator's latest metrics once the job reports them. */
  function drawGraph() {
    if (!current.pipeline) return;
    renderGraph($("d-graph"), current.pipeline.graph, {
      metrics: current.operators,
      selected: current.selected,
      onSelect: (node) => {
        current.selected = node.id;
        drawGraph();
      },
    });
    renderNode();
  }

  /** The selected node: its metrics over the controller's window, newest and highest. */
  function renderNode() {
    const panel = $("d-node");
    const selected = current.selected;
    if (!selected) {
      renderCharts($("d-charts"), null, METRIC_NAMES);
      panel.hidden = true;
      return;
    }
    panel.hidden = false;
    const group = (current.groups || []).find((o) => o.operatorId === selected);
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
      h("h3", {}, selected, " ", h("button", {
        type: "button", class: "link", onclick: () => { current.selected = null; drawGraph(); },
      }, "close")),
      rows.length
        ? h("table", { class: "table" },
          h("thead", {}, h("tr", {}, h("th", {}, "metric"), h("th", {}, "now"),
            h("th", {}, "highest"), h("th", {}, "points"))),
          h("tbody", {}, ...rows))
        : h("p", { class: "muted" }, "No metrics yet: the job reports them as it runs."));
  }

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

  const poll = poller(async (stopped) => {
    const version = current.version;
    let pipeline, jobs;
    try {
      [pipeline, jobs] = await Promise.all([api("GET", base), api("GET", `${base}/jobs`)]);
    } catch (err) {
      if (stopped()) return;
      $("detail-loading").hidden = true;
      showError($("load-alert"), "Could not load the pipeline", err);
      return;
    }
    if (stopped() || version !== current.version) return;
    $("detail-loading").hidden = true;
    hide($("load-alert"));
    renderPipeline(pipeline);
    renderJob(jobs.data.find((j) => j.id === pipeline.job_id));
    const job = `${base}/jobs/${encodeURIComponent(pipeline.job_id)}`;
    if (pipeline.preview && !outputOpen) {
      outputOpen = true;
      output.open(`${job}/output`);
    }
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
        (list) => checkpoints.render(list.data), stopped),
      section("errors-alert", "Could not load the errors", `${job}/errors?limit=50`, renderErrors,
        stopped),
    ]);
  });

  async function act(action) {
    if (current.busy) return;
    const name = current.pipeline ? current.pipeline.name : id;
    const question = CONFIRM[action];
    if (question && !confirm(question(name))) return;
    hide($("detail-alert"));
    hide($("detail-status"));
    current.busy = true;
    current.version += 1;
    if (current.pipeline) renderPipeline(current.pipeline);
    try {
      if (action === "delete") {
        await api("DELETE", base);
        if (!current.stopped) navigate("/", `Deleted pipeline ${name}.`);
        return;
      }
      const [method, suffix, body, done] = ACTIONS[action];
      const pipeline = await api(method, base + suffix, body);
      if (current.stopped) return;
      current.pipeline = pipeline;
      showText($("detail-status"), done);
    } catch (err) {
      if (current.stopped) return;
      showError($("detail-alert"), `Could not ${action.replace("-", " ")} ${name}`, err);
    } finally {
      current.busy = false;
      if (!current.stopped) {
        if (current.pipeline) renderPipeline(current.pipeline);
        poll.now();
      }
    }
  }

  // A new parallelism or checkpoint interval restarts the job from its last checkpoint with
  // them (PATCH /pipelines/{id}).
  async function applySettings(event) {
    event.preventDefault();
    if (!current.pipeline) return;
    const form = event.target;
    const parallelism = Number(form.elements.namedItem("parallelism").value);
    const seconds = Number(form.elements.namedItem("interval").value);
    const name = current.pipeline.name;
    if (!confirm(`Apply the settings to ${name}? A running job restarts from its checkpoint.`)) {
      return;
    }
    hide($("settings-alert"));
    try {
      const pipeline = await api("PATCH", base, {
        parallelism, checkpoint_interval_micros: Math.round(seconds * 1e6),
      });
      if (current.stopped) return;
      renderPipeline(pipeline);
      showText($("detail-status"), `Settings applied: parallelism ${pipeline.parallelism}, `
        + `a checkpoint every ${pipeline.checkpoint_interval_micros / 1e6} s.`);
      poll.now();
    } catch (err) {
      if (!current.stopped) showError($("settings-alert"), "Could not apply the settings", err);
    }
  }

  for (const button of document.querySelectorAll("#detail-view [data-action]")) {
    on(button, "click", () => act(button.dataset.action));
  }
  on($("settings-form"), "submit", applySettings);

  return {
    stop() {
      current.stopped = true;
      poll.stop();
      output.close();
      checkpoints.reset();
      listeners.abort();
      $("detail-view").hidden = true;
    },
  };
}
