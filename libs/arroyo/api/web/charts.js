// Charts of an operator's metrics over time (operator_metric_groups), drawn by uPlot
// (vendor/uplot.js): one small chart per metric group, its x axis the bucket's time.

import uPlot from "./vendor/uplot.js";

const WIDTH = 300, HEIGHT = 140;

/** The points of a metric group, as uPlot's columns: [[seconds...], [values...]]. */
function columns(group) {
  const points = group.subtasks.flatMap((t) => t.metrics).sort((a, b) => a.time - b.time);
  return [points.map((p) => p.time / 1e6), points.map((p) => p.value)];
}

/**
 * A small line chart titled `title` in a new <figure> (its `data-metric` is `name`): `data` is
 * uPlot's columns, [[x...], [y...]], x in seconds since the epoch.
 */
export function lineChart(name, title, data) {
  const box = document.createElement("figure");
  box.className = "chart";
  box.dataset.metric = name;
  const caption = document.createElement("figcaption");
  caption.textContent = title;
  box.append(caption);
  box._plot = new uPlot({
    width: WIDTH,
    height: HEIGHT,
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true } },
    axes: [{ size: 30 }, { size: 50 }],
    series: [{}, { label: title, stroke: "#2563eb", fill: "rgba(37, 99, 235, 0.08)", width: 1.5,
      points: { show: data[0].length < 3 } }],
  }, data, box);
  return box;
}

/** Replaces `container`'s charts with `charts` (destroying the old ones' plots). */
export function replaceCharts(container, charts) {
  for (const old of container.querySelectorAll(".chart")) old._plot?.destroy();
  container.replaceChildren(...charts);
}

/**
 * Draws a chart per metric group of `operator` into `container` (replacing what was there),
 * titled with `names[group.name]`.
 */
export function renderCharts(container, operator, names) {
  replaceCharts(container, (operator ? operator.metricGroups : []).map((group) =>
    lineChart(group.name, names[group.name] || group.name, columns(group))));
}
