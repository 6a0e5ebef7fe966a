// uPlot, for the charts of an operator's metrics over time (libs/arroyo/api/web/charts.js),
// bundled into one ES module (scripts/vendor-web): libs/arroyo/api/web/vendor/uplot.js. Its
// stylesheet is copied beside it as uplot.css.
export { default } from "uplot";
