// Dagre's layered graph layout, for the pipeline graph (libs/arroyo/api/web/graph.js), bundled
// into one ES module (scripts/vendor-web): libs/arroyo/api/web/vendor/dagre.js.
import dagre from "@dagrejs/dagre";

export const { graphlib, layout } = dagre;
