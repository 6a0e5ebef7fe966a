// A job's checkpoints (GET .../checkpoints): a timeline of its epochs, with each one's duration
// and state size, and, per epoch, each stateful query's (operator's) state, rows and offsets.
// The API has one entry per query and epoch: an epoch is the micro-batch every query
// committed under that id.

import { lineChart, replaceCharts } from "./charts.js";
import { fmtBytes, fmtDuration, fmtNumber, fmtTime, h } from "./util.js";

/** The API's entries, one per epoch (newest first), each with its queries'. */
export function epochs(checkpoints) {
  const byEpoch = new Map();
  for (const c of checkpoints) {
    const epoch = byEpoch.get(c.epoch) || {
      epoch: c.epoch, queries: [], duration: 0, stateBytes: 0, stateRows: 0, rowsIn: 0,
      finishedAt: 0, counted: true,
    };
    epoch.queries.push(c);
    epoch.duration = Math.max(epoch.duration, c.duration_micros);
    epoch.stateBytes += c.state_bytes;
    epoch.rowsIn += c.rows_in;
    if (c.state_rows < 0) epoch.counted = false;
    else epoch.stateRows += c.state_rows;
    epoch.finishedAt = Math.max(epoch.finishedAt, c.finished_at);
    byEpoch.set(c.epoch, epoch);
  }
  return [...byEpoch.values()].sort((a, b) => b.epoch - a.epoch);
}

/**
 * The checkpoints view's behaviour: `render(list)` draws the API's answer into `charts` (the
 * timeline) and `list` (one expandable entry per epoch; those the user opened stay open).
 */
export function checkpointsView({ charts, list, table, empty }) {
  const open = new Set();
  let drawn = null;

  function entry(e) {
    const details = h("details", { "data-epoch": e.epoch, open: open.has(e.epoch) },
      h("summary", {},
        h("strong", {}, `Epoch ${e.epoch}`),
        h("span", { class: "muted" }, ` · ${fmtDuration(e.duration)} · ${fmtBytes(e.stateBytes)}`
          + ` of state · ${fmtNumber(e.rowsIn)} rows in · ${fmtTime(e.finishedAt)}`)),
      h("table", { class: "table" },
        h("thead", {}, h("tr", {}, ["Query", "State rows", "State size", "Rows in",
          "Duration", "Watermark", "Offsets"].map((t) => h("th", {}, t)))),
        h("tbody", {}, e.queries.map((q) => h("tr", { "data-query": q.query },
          h("td", {}, q.query),
          h("td", {}, q.state_rows < 0 ? "—" : fmtNumber(q.state_rows)),
          h("td", {}, fmtBytes(q.state_bytes)),
          h("td", {}, fmtNumber(q.rows_in)),
          h("td", {}, fmtDuration(q.duration_micros)),
          h("td", {}, fmtTime(q.watermark_micros)),
          h("td", {}, h("code", { class: "small" }, JSON.stringify(q.offsets))))))));
    details.addEventListener("toggle", () => {
      if (details.open) open.add(e.epoch);
      else open.delete(e.epoch);
    });
    return details;
  }

  return {
    render(checkpoints) {
      const key = JSON.stringify(checkpoints);
      if (key === drawn) return;
      drawn = key;
      const all = epochs(checkpoints);
      table.hidden = all.length === 0;
      empty.hidden = all.length > 0;
      list.replaceChildren(...all.map(entry));
      const oldest = all.slice().reverse();
      const x = oldest.map((e) => e.finishedAt / 1e6);
      replaceCharts(charts, all.length === 0 ? [] : [
        lineChart("checkpoint_duration", "checkpoint duration (ms)",
          [x, oldest.map((e) => e.duration / 1000)]),
        lineChart("checkpoint_state", "state size (bytes)", [x, oldest.map((e) => e.stateBytes)]),
      ]);
    },
    reset() {
      open.clear();
      drawn = null;
      list.replaceChildren();
      replaceCharts(charts, []);
    },
  };
}
