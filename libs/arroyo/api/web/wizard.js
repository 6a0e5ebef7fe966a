// The wizard that saves a connection table (POST /api/v1/connection_tables), a step at a
// time: the connector; the connection profile whose settings it takes (chosen, or made and
// tested here); its options, from the connector's JSON schema; its schema (columns, or a JSON
// Schema checked by the API, or the query's columns for a sink); then tested (the API's
// server-sent events, each shown as it comes) and saved. Each step shows its own failures.

import { schemaForm } from "./schemaform.js";
import { API, ApiError, api, h, hide, showError, showText } from "./util.js";

const COLUMN_TYPES = [
  "string", "int32", "int64", "uint32", "uint64", "f32", "f64", "bool", "timestamp", "json",
  "bytes",
];

/** Runs `call` with `button` disabled and saying `busy`, then as it was. */
async function busyWith(button, busy, call) {
  const label = button.textContent;
  button.disabled = true;
  button.textContent = busy;
  try {
    return await call();
  } finally {
    button.disabled = false;
    button.textContent = label;
  }
}

/** A control under its label (a select's options are no part of its name, as when wrapped). */
const field = (text, control) => h("div", { class: "field" },
  h("label", { for: control.id }, text), control);
const alertBox = () => h("div", { class: "alert", role: "alert", hidden: true });
const statusLine = () => h("p", { class: "small", role: "status", hidden: true });
const step = (title, ...children) => h("fieldset", { class: "step" },
  h("legend", {}, title), ...children);

/** POST /connection_tables/test: `onEvent({error, done, message})` for each event. */
async function testTable(body, onEvent) {
  let response;
  try {
    response = await fetch(`${API}/connection_tables/test`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify(body),
    });
  } catch (err) {
    throw new ApiError(0, `cannot reach the API (${err.message})`, null);
  }
  if (!response.ok) {
    const data = await response.json().catch(() => null);
    const said = data && typeof data.error === "string" ? data.error : response.statusText;
    throw new ApiError(response.status, `${said} (HTTP ${response.status})`, data);
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += value;
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = event.split("\n").filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trim()).join("\n");
      if (data) onEvent(JSON.parse(data));
    }
  }
}

/** The profile step of `connector`: a select of its saved profiles, or a new one's form. */
function profileStep(connector, profiles) {
  const mine = profiles.filter((p) => p.connector === connector.name);
  const select = h("select", { id: "wiz-profile" },
    h("option", { value: "" }, "None: the table's options say it all"),
    mine.map((p) => h("option", { value: p.id }, p.name)),
    h("option", { value: "new" }, "New profile…"));
  const form = schemaForm(connector.connection_schema, { prefix: "wiz-conn", text: true });
  const name = h("input", { id: "wiz-profile-name", autocomplete: "off", maxlength: "255" });
  const alert = alertBox();
  const status = statusLine();
  const testButton = h("button", { type: "button" }, "Test profile");
  const saveButton = h("button", { type: "button" }, "Save profile");
  const fresh = h("div", { class: "profile-new", hidden: true },
    field("Profile name", name), form.element,
    h("div", { class: "buttons" }, testButton, saveButton), alert);
  select.addEventListener("change", () => {
    fresh.hidden = select.value !== "new";
  });
  const settings = () => ({ connector: connector.name, config: form.values() });
  testButton.addEventListener("click", () => busyWith(testButton, "Testing…", async () => {
    hide(alert);
    hide(status);
    try {
      const result = await api("POST", "/connection_profiles/test", settings());
      status.className = result.ok ? "small ok" : "small bad";
      showText(status, result.ok ? `Connected: ${result.message}` : `Failed: ${result.message}`);
    } catch (err) {
      showError(alert, "Could not test the profile", err);
    }
  }));
  saveButton.addEventListener("click", () => busyWith(saveButton, "Saving…", async () => {
    hide(alert);
    hide(status);
    try {
      const saved = await api("POST", "/connection_profiles", { name: name.value, ...settings() });
      select.insertBefore(h("option", { value: saved.id }, saved.name), select.lastChild);
      select.value = saved.id;
      fresh.hidden = true;
      status.className = "small ok";
      showText(status, `Saved profile ${saved.name}.`);
    } catch (err) {
      showError(alert, "Could not save the profile", err);
    }
  }));
  const element = step("2. Connection profile", field("Profile", select), fresh, status);
  return { element, profileId: () => (/^(|new)$/.test(select.value) ? null : select.value) };
}

/** The schema step: the format, and the columns (given, read from a JSON Schema, or none). */
function schemaStep(connector) {
  const format = h("select", { id: "wiz-format" },
    connector.formats.map((f) => h("option", { value: f, selected: f === connector.default_format }, f)));
  const mode = h("select", { id: "wiz-schema-mode" },
    h("option", { value: "columns" }, "Columns"),
    h("option", { value: "json" }, "JSON Schema"),
    h("option", { value: "inferred" }, "None (a sink takes the query's, a generator its own)"));
  const rows = h("tbody", {});
  const addColumn = () => {
    const row = h("tr", { class: "column" },
      h("td", {}, h("input", { "aria-label": "Column name", autocomplete: "off" })),
      h("td", {}, h("select", { "aria-label": "Column type" },
        COLUMN_TYPES.map((t) => h("option", { value: t }, t)))),
      h("td", {}, h("input", { type: "checkbox", "aria-label": "Nullable", checked: true })),
      h("td", {}, h("button", { type: "button", onclick: () => row.remove() }, "Remove")));
    rows.append(row);
  };
  const columns = h("div", {},
    h("table", { class: "table columns-editor" },
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Type"),
        h("th", {}, "Nullable"), h("th", {}))), rows),
    h("button", { type: "button", onclick: addColumn }, "Add column"));
  const definition = h("textarea", { id: "wiz-json-schema", rows: "6", spellcheck: "false" });
  const alert = alertBox();
  const status = statusLine();
  const check = h("button", { type: "button" }, "Check schema");
  const json = h("div", { hidden: true },
    h("label", { for: "wiz-json-schema" }, "JSON Schema"), definition,
    h("div", { class: "buttons" }, check));
  const show = () => {
    hide(status);
    hide(alert);
    columns.hidden = mode.value !== "columns";
    json.hidden = mode.value !== "json";
  };
  mode.addEventListener("change", show);
  if (connector.formats.length === 0) mode.value = "inferred";
  show();

  function schema() {
    const out = connector.formats.length ? { format: format.value } : {};
    if (mode.value === "json") {
      out.definition = { type: "json_schema", schema: definition.value };
    } else if (mode.value === "columns") {
      out.fields = [...rows.querySelectorAll("tr")].map((tr) => {
        const [name, type, nullable] = tr.querySelectorAll("input, select");
        return { name: name.value.trim(), type: type.value, required: !nullable.checked };
      });
    }
    return out;
  }

  check.addEventListener("click", () => busyWith(check, "Checking…", async () => {
    hide(alert);
    hide(status);
    try {
      const checked = await api("POST", "/connection_tables/schemas/test", schema());
      status.className = "small ok";
      showText(status, "Valid: ", ...checked.fields.flatMap((f, i) => [i ? ", " : "",
        h("code", {}, `${f.name} ${f.sql_name}${f.required ? " NOT NULL" : ""}`)]));
    } catch (err) {
      showError(alert, "Could not check the schema", err);
    }
  }));
  const element = step("4. Schema",
    h("div", { class: "row" },
      connector.formats.length > 0 && field("Format", format),
      field("Columns from", mode)),
    columns, json, alert, status);
  return { element, schema };
}

/**
 * The wizard, its connectors and profiles fetched now; `onSaved(table)` is told
 * of each table saved. Returns `{ element }`; all its state lives here.
 */
export function connectionWizard({ onSaved }) {
  const alert = alertBox();
  const choose = h("select", { id: "wiz-connector" }, h("option", { value: "" }, "Loading…"));
  const about = h("p", { class: "muted small" });
  const rest = h("div", {});
  let connectors = [];

  async function load() {
    try {
      const [list, profiles] = await Promise.all([
        api("GET", "/connectors"), api("GET", "/connection_profiles")]);
      connectors = list.data;
      choose.replaceChildren(h("option", { value: "" }, "Choose a connector…"),
        ...connectors.map((c) => h("option", { value: c.name },
          `${c.name} (${c.roles.filter((r) => r !== "lookup").join(", ")})`)));
      choose.addEventListener("change", () => {
        const connector = connectors.find((c) => c.name === choose.value);
        about.textContent = connector ? connector.description : "";
        rest.replaceChildren(...(connector ? tableSteps(connector, profiles.data) : []));
      });
    } catch (err) {
      showError(alert, "Could not list the connectors", err);
    }
  }

  function tableSteps(connector, profiles) {
    const roles = connector.roles.filter((r) => r === "source" || r === "sink");
    const role = h("select", { id: "wiz-role" }, roles.map((r) => h("option", { value: r }, r)));
    const profile = connector.connection_schema ? profileStep(connector, profiles) : null;
    const options = schemaForm(connector.options_schema, { prefix: "wiz-opt" });
    const schema = schemaStep(connector);
    const name = h("input", { id: "wiz-name", autocomplete: "off", maxlength: "255" });
    const testButton = h("button", { type: "button" }, "Test table");
    const saveButton = h("button", { type: "button", class: "primary" }, "Save table");
    const saveAlert = alertBox();
    const log = h("ol", { class: "test-log", role: "log", hidden: true });
    const status = statusLine();

    function body() {
      const config = options.values();
      if (roles.length > 1) config.type = role.value;
      return {
        name: name.value.trim(), connector: connector.name,
        connectionProfileId: profile ? profile.profileId() : null,
        config, schema: schema.schema(),
      };
    }
    testButton.addEventListener("click", () => busyWith(testButton, "Testing…", async () => {
      hide(saveAlert);
      hide(status);
      log.replaceChildren();
      try {
        const table = body();
        // The name is not tested; the API takes none that is not one.
        await testTable({ ...table, name: table.name || "untitled" }, (event) => {
          log.hidden = false;
          log.append(h("li", { class: event.error ? "bad" : event.done ? "ok" : "" },
            event.message));
        });
      } catch (err) {
        showError(saveAlert, "Could not test the table", err);
      }
    }));
    saveButton.addEventListener("click", () => busyWith(saveButton, "Saving…", async () => {
      hide(saveAlert);
      hide(status);
      try {
        const saved = await api("POST", "/connection_tables", body());
        status.className = "small ok";
        showText(status, `Saved ${saved.name}: queries may name it now.`);
        onSaved(saved);
      } catch (err) {
        showError(saveAlert, "Could not save the table", err);
      }
    }));
    return [
      profile ? profile.element : step("2. Connection profile",
        h("p", { class: "muted small" }, `${connector.name} takes no profile.`)),
      step("3. Options",
        roles.length > 1 && field("Table type", role), options.element),
      schema.element,
      step("5. Test and save",
        field("Table name", name),
        h("div", { class: "buttons" }, testButton, saveButton),
        log, saveAlert, status),
    ];
  }

  load();
  const element = h("form", { class: "wizard", novalidate: true,
    onsubmit: (event) => event.preventDefault() },
  step("1. Connector", field("Connector", choose), about), rest, alert);
  return { element };
}
