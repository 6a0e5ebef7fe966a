// The pipeline graph: the compiler's dataflow (sources, views, sinks) with the stateful
// operators the worker reports (operator_metric_groups: "<sink>/<operator><n>") drawn before
// their sink, laid out by dagre (vendor/dagre.js), each node with its live rows per second in
// and out, coloured by its backpressure. Clicking a node calls `onSelect(node)`.

import { graphlib, layout } from "./vendor/dagre.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 180, H = 48;

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (value != null) el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child != null) el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** The newest value of each metric group of each operator: { id: { label, name: value } }. */
export function latestMetrics(groups) {
  const out = {};
  for (const o of groups || []) {
    const values = { label: o.label };
    for (const g of o.metricGroups) {
      const points = g.subtasks.flatMap((t) => t.metrics);
      if (points.length) values[g.name] = points[points.length - 1].value;
    }
    out[o.operatorId] = values;
  }
  return out;
}

/**
 * The compiler's graph with the reported stateful operators added: each sink's operators,
 * "<sink>/<name><n>" with n counted from the sink down, become a chain from the sink's inputs
 * to the sink.
 */
export function withOperators(graph, metrics) {
  const nodes = [...graph.nodes];
  let edges = [...graph.edges];
  const bySink = new Map();
  for (const id of Object.keys(metrics || {})) {
    const slash = id.lastIndexOf("/");
    if (slash < 0) continue;
    const sink = id.slice(0, slash);
    const index = Number((/(\d+)$/.exec(id) || [0, 0])[1]);
    if (!bySink.has(sink)) bySink.set(sink, []);
    bySink.get(sink).push({ id, index });
  }
  for (const [sink, ops] of bySink) {
    if (!nodes.some((n) => n.id === sink)) continue;
    // From the sink's inputs up to the sink: the highest index is the furthest from it.
    const chain = ops.sort((a, b) => b.index - a.index).map((o) => o.id);
    const inputs = edges.filter((e) => e.target === sink).map((e) => e.source);
    edges = edges.filter((e) => e.target !== sink);
    for (const id of chain) nodes.push({ id, kind: "operator", label: metrics[id].label });
    const path = [...chain, sink];
    for (const input of inputs) edges.push({ source: input, target: path[0] });
    for (let i = 1; i < path.length; i += 1) edges.push({ source: path[i - 1], target: path[i] });
  }
  return { nodes, edges };
}

const fmtRate = (v) => (v == null ? "—" : v >= 1000
  ? `${(v / 1000).toLocaleString(undefined, { maximumFractionDigits: 1 })}K/s`
  : `${v.toLocaleString(undefined, { maximumFractionDigits: 1 })}/s`);

function pressure(value) {
  if (value == null) return "";
  return value >= 0.8 ? " pressure-high" : value >= 0.5 ? " pressure-mid" : " pressure-low";
}

/** The node's figures in one line: rows in and out per second, or its state. */
function figures(node, m) {
  if (!m) return "";
  if (node.kind === "source") return `out ${fmtRate(m.messages_sent)}`;
  if (node.kind === "sink") return `in ${fmtRate(m.messages_recv)}`;
  if (node.kind === "operator") {
    const rows = m.state_rows == null || m.state_rows < 0 ? "" : ` · ${m.state_rows} rows`;
    return `state ${Math.round((m.state_bytes || 0) / 1024)} KiB${rows}`;
  }
  return "";
}

export function renderGraph(container, graph, { metrics, onSelect, selected } = {}) {
  if (!graph || graph.nodes.length === 0) {
    container.hidden = true;
    container.replaceChildren();
    return;
  }
  const full = metrics ? withOperators(graph, metrics) : graph;
  const g = new graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: 14, ranksep: 48, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of full.nodes) g.setNode(n.id, { width: W, height: H });
  for (const e of full.edges) {
    if (g.hasNode(e.source) && g.hasNode(e.target)) g.setEdge(e.source, e.target);
  }
  layout(g);
  const { width, height } = g.graph();
  const marker = `arrow-${container.id}`;
  const edges = g.edges().map((e) => {
    const points = g.edge(e).points;
    const d = points.map((p, i) => `${i ? "L" : "M"}${p.x},${p.y}`).join(" ");
    return s("path", { class: "edge", d, "marker-end": `url(#${marker})` });
  });
  const nodes = full.nodes.map((n) => {
    const { x: cx, y: cy } = g.node(n.id);
    const [x, y] = [cx - W / 2, cy - H / 2];
    const m = metrics ? metrics[n.id] : null;
    // The id is the table's (or view's) name, a sink's with a "sink:" prefix; the label is
    // the connector, or the operator's kind.
    const kind = n.label && n.label !== n.kind ? `${n.kind} · ${n.label}` : n.kind;
    let id = n.id.startsWith(`${n.kind}:`) ? n.id.slice(n.kind.length + 1) : n.id;
    if (n.kind === "operator") id = id.slice(id.lastIndexOf("/") + 1);
    const name = id.length > 24 ? `${id.slice(0, 23)}…` : id;
    const cls = `node ${n.kind}${pressure(m && m.backpressure)}${selected === n.id ? " selected" : ""}`;
    return s("g", {
      class: cls, "data-id": n.id, tabindex: onSelect ? 0 : null, role: onSelect ? "button" : null,
      "aria-label": `${kind}: ${id}`,
      onclick: onSelect ? () => onSelect(n) : null,
      onkeydown: onSelect ? (ev) => (ev.key === "Enter" || ev.key === " ") && onSelect(n) : null,
    },
    s("title", {}, `${kind}: ${id}`),
    s("rect", { x, y, width: W, height: H, rx: 7 }),
    s("text", { x: x + 10, y: y + 14, class: "kind" }, kind),
    s("text", { x: x + 10, y: y + 29, class: "label" }, name),
    s("text", { x: x + 10, y: y + 42, class: "rate" }, figures(n, m)));
  });
  const svg = s("svg", {
    viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
    "aria-label": `dataflow: ${full.nodes.map((n) => `${n.kind} ${n.id}`).join(", ")}`,
  },
  s("defs", {}, s("marker", {
    id: marker, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7,
    orient: "auto-start-reverse",
  }, s("path", { d: "M0,0 L10,5 L0,10 z" }))),
  edges, nodes);
  container.hidden = false;
  container.replaceChildren(svg);
}
