// /: the pipelines, and the form for a new one around the SQL editor (validated as it is typed;
// Ctrl/Cmd-Enter previews, Ctrl/Cmd-Shift-Enter creates).

import { renderConnectionsAside } from "./connections.js";
import { sqlEditor } from "./editor.js";
import { EXAMPLES } from "./examples.js";
import { renderGraph } from "./graph.js";
import {
  $, ApiError, api, badge, fmtTime, h, hide, poller, renderIfChanged, showError, showText,
  showValidity,
} from "./util.js";

/**
 * The page, built once (its editor keeps what the user typed while they look elsewhere);
 * `show()` lists the pipelines until the `stop()` of what it returns. `navigate(path)` opens
 * another page (a preview's).
 */
export function pipelinesPage({ navigate }) {
  const form = $("new-form");
  const field = (name) => form.elements.namedItem(name);
  let refreshList = async () => {};

  const editor = sqlEditor($("sql-editor"), {
    label: "SQL",
    hint: "CREATE TABLE ... ; INSERT INTO ... SELECT ...",
    validate: (query) => api("POST", "/pipelines/validate_query", { query }),
    onPreview: () => $("preview").click(),
    onLaunch: () => form.requestSubmit(),
    // Validation as one types speaks in its own line; the buttons' results stay as they were.
    onValidated: (result, err) => showValidity($("live-status"), result, err,
      () => "Valid."),
  });
  api("GET", "/connectors").then((list) => editor.setConnectors(list.data), () => {});
  for (const [name, query] of Object.entries(EXAMPLES)) {
    $("examples").append(h("option", { value: name }, name));
  }
  $("examples").addEventListener("change", (event) => {
    const query = EXAMPLES[event.target.value];
    if (query) editor.setText(query);
    event.target.value = "";
  });

  function resetFormOutput() {
    for (const id of ["form-alert", "form-status", "diagnostics", "warnings", "form-graph"]) {
      hide($(id));
    }
  }

  function renderDiagnostics(diagnostics) {
    if (!diagnostics || diagnostics.length === 0) return;
    showText($("diagnostics"), ...diagnostics.map((d) => h("li", {},
      d.line == null
        ? h("span", { class: "loc" }, "—")
        : h("button", {
          type: "button", class: "loc", title: "Show in the query",
          onclick: () => editor.jumpTo(d.line, d.column),
        }, `${d.line}:${d.column ?? 1}`),
      h("span", { class: "message" }, d.message),
      h("code", { class: "muted" }, d.code))));
  }

  async function runForm(what, call) {
    resetFormOutput();
    for (const button of form.querySelectorAll("button")) button.disabled = true;
    try {
      await call();
    } catch (err) {
      showError($("form-alert"), what, err);
      if (err instanceof ApiError && err.body && err.body.diagnostics) {
        renderDiagnostics(err.body.diagnostics);
      }
    } finally {
      for (const button of form.querySelectorAll("button")) button.disabled = false;
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
      field("name").value = "";
      // The list (above the form) grows by a row first: the link then appears where it stays,
      // not where a click aimed at it a moment ago would miss it.
      await refreshList();
      showText($("form-status"), "Created ",
        h("a", { href: `/pipelines/${encodeURIComponent(created.id)}` }, created.name), ".");
    });
  });

  $("preview").addEventListener("click", () => runForm("Could not start a preview", async () => {
    const created = await api("POST", "/pipelines/preview", { query: editor.text() });
    navigate(`/pipelines/${encodeURIComponent(created.id)}`);
  }));

  return {
    editor,
    show() {
      $("list-view").hidden = false;
      $("list-loading").hidden = false;
      renderConnectionsAside($("connections-aside"), editor);
      const poll = poller(async (stopped) => {
        try {
          const page = await api("GET", "/pipelines?limit=100");
          if (stopped()) return;
          $("list-loading").hidden = true;
          hide($("list-alert"));
          renderIfChanged($("pipelines"), page.data, (pipelines) => pipelines.map((p) =>
            h("tr", {},
              h("td", {},
                h("a", { href: `/pipelines/${encodeURIComponent(p.id)}` }, p.name),
                p.preview && h("span", { class: "tag" }, "preview")),
              h("td", {}, badge(p)),
              h("td", { class: "muted" }, fmtTime(p.created_at)))));
          $("list-empty").hidden = page.data.length > 0;
          $("list-more").hidden = !page.has_more;
        } catch (err) {
          if (stopped()) return;
          $("list-loading").hidden = true;
          showError($("list-alert"), "Could not list the pipelines", err);
        }
      });
      refreshList = poll.now;
      return {
        stop() {
          poll.stop();
          refreshList = async () => {};
          $("list-view").hidden = true;
        },
      };
    },
  };
}
