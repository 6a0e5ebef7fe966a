// /connections: the saved connection profiles and connection tables (Arroyo's
// /api/v1/connection_profiles and /connection_tables), each deletable, and the wizard that
// saves a table (wizard.js). Also the pipelines page's list of the saved tables and profiles a
// query may name, a table's name put into the SQL editor with a click.

import { connectionWizard } from "./wizard.js";
import { $, api, fmtTime, h, hide, poller, renderIfChanged, showError, showText } from "./util.js";

const profileRows = (profiles, remove) => profiles.map((p) =>
  h("tr", { "data-profile": p.name },
    h("td", {}, h("code", {}, p.name)),
    h("td", {}, p.connector),
    h("td", { class: "muted" }, fmtTime(p.created_at)),
    h("td", {}, h("button", { type: "button", onclick: () => remove(p) }, "Delete"))));

const tableRows = (tables, remove) => tables.map((t) =>
  h("tr", { "data-table": t.name },
    h("td", {}, h("code", {}, t.name)),
    h("td", {}, t.connector,
      t.connection_profile && h("span", { class: "muted small" }, ` · ${t.connection_profile.name}`)),
    h("td", {}, t.table_type),
    h("td", { class: "small" }, t.schema.inferred
      ? h("span", { class: "muted" }, "the query's columns")
      : t.schema.fields.map((f) => f.name).join(", ")),
    h("td", {}, h("button", { type: "button", onclick: () => remove(t) }, "Delete"))));

export function connectionsView() {
  $("connections-view").hidden = false;
  const status = $("connections-status");
  hide(status);

  async function remove(kind, path, item) {
    const what = `connection ${kind} ${item.name}`;
    if (!confirm(`Delete ${what}?${kind === "table" ? " Pipelines that use it keep their copy." : ""}`)) return;
    hide(status);
    const alert = $(kind === "table" ? "tables-alert" : "profiles-alert");
    hide(alert);
    try {
      await api("DELETE", `${path}/${encodeURIComponent(item.id)}`);
      showText(status, `Deleted ${what}.`);
      poll.now();
    } catch (err) {
      showError(alert, `Could not delete ${what}`, err);
    }
  }
  const removeTable = (t) => remove("table", "/connection_tables", t);
  const removeProfile = (p) => remove("profile", "/connection_profiles", p);

  async function list(path, alertId, what, render) {
    try {
      const page = await api("GET", path);
      hide($(alertId));
      render(page.data);
    } catch (err) {
      showError($(alertId), `Could not list the ${what}`, err);
    }
  }

  const poll = poller(async (stopped) => {
    await Promise.all([
      list("/connection_tables?limit=100", "tables-alert", "connection tables", (data) => {
        if (stopped()) return;
        renderIfChanged($("connection-tables"), data, (d) => tableRows(d, removeTable));
        $("tables-empty").hidden = data.length > 0;
      }),
      list("/connection_profiles", "profiles-alert", "connection profiles", (data) => {
        if (stopped()) return;
        renderIfChanged($("connection-profiles"), data, (d) => profileRows(d, removeProfile));
        $("profiles-empty").hidden = data.length > 0;
      }),
    ]);
  });

  const wizard = connectionWizard({ onSaved: () => poll.now() });
  $("connections-wizard").replaceChildren(wizard.element);
  return {
    stop() {
      poll.stop();
      $("connections-wizard").replaceChildren();
      $("connections-view").hidden = true;
    },
  };
}

/**
 * The saved tables and profiles a query may name, in `el` (fetched now: call it whenever the
 * pipelines page is shown); a table's name is a button that puts it into `editor` at its
 * cursor (`editor.insert(text)`).
 */
export async function renderConnectionsAside(el, editor) {
  const alert = h("div", { class: "alert", role: "alert", hidden: true });
  try {
    const [tables, profiles] = await Promise.all([
      api("GET", "/connection_tables?limit=100"), api("GET", "/connection_profiles")]);
    el.replaceChildren(h("div", {},
      h("h3", {}, "Connections"),
      tables.data.length === 0
        ? h("p", { class: "muted small" }, "No saved tables: ",
          h("a", { href: "/connections" }, "make one"), ".")
        : h("ul", { class: "aside-list" }, tables.data.map((t) => h("li", {},
          h("button", {
            type: "button", class: "link", title: `Insert ${t.name} into the query`,
            "aria-label": `Insert ${t.name}`, onclick: () => editor.insert(t.name),
          }, t.name),
          h("span", { class: "muted small" }, ` ${t.connector} · ${t.table_type}`)))),
      profiles.data.length > 0 && h("p", { class: "muted small" }, "Profiles: ",
        profiles.data.flatMap((p, i) => [i ? ", " : "",
          h("code", {}, p.name), ` (${p.connector})`])),
      alert));
  } catch (err) {
    el.replaceChildren(h("h3", {}, "Connections"), alert);
    showError(alert, "Could not list the connections", err);
  }
}
