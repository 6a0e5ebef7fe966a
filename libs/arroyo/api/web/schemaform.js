// A form made from a JSON schema of options, as GET /api/v1/connectors gives a connector's
// (`options_schema` for a table, `connection_schema` for a profile): one input per property,
// of the property's kind (a checkbox, a number, a select of an enum's values, text), required
// ones marked, descriptions as hints, and the options the schema marks `"secret": true` in
// masked inputs. The browser checks nothing (the form is `novalidate`): the API's refusal,
// which names the option, is what the user sees.

import { h } from "./util.js";

/** A property as one JSON type: an optional option is `anyOf: [{type}, {type: "null"}]`. */
function resolved(property) {
  const branches = (property.anyOf || []).filter((b) => b.type !== "null");
  return branches.length === 1 ? { ...branches[0], ...property, anyOf: undefined } : property;
}

function kindOf(property) {
  if (Array.isArray(property.enum)) return "enum";
  if (property.type === "boolean") return "boolean";
  if (property.type === "integer" || property.type === "number") return "number";
  return "text";
}

function input(name, property, kind, required, hintId, id) {
  const common = { id, name, "aria-describedby": hintId, "aria-required": required && "true" };
  if (kind === "enum") {
    return h("select", common,
      h("option", { value: "" }, required ? "Choose…"
        : property.default == null ? "(unset)" : `(default: ${property.default})`),
      property.enum.map((value) => h("option", { value: String(value) }, String(value))));
  }
  if (kind === "boolean") {
    return h("input", { ...common, type: "checkbox", checked: property.default === true });
  }
  const placeholder = property.default == null ? undefined : String(property.default);
  if (kind === "number") {
    const step = property.type === "integer" ? "1" : "any";
    return h("input", { ...common, type: "number", step, placeholder });
  }
  const secret = property.secret === true || property.format === "password";
  return h("input", {
    ...common, type: secret ? "password" : "text", placeholder,
    autocomplete: secret ? "new-password" : "off",
  });
}

/**
 * The form of `schema`'s properties, its ids prefixed by `prefix`. `values()` answers the
 * options set (empty inputs left out, a checkbox only when it differs from its default),
 * numbers as numbers unless `text` (a profile's config takes strings only).
 */
export function schemaForm(schema, { prefix, text = false }) {
  const required = new Set(schema.required || []);
  const fields = [];
  const rows = Object.entries(schema.properties || {}).map(([name, raw], i) => {
    const property = resolved(raw);
    const kind = kindOf(property);
    const id = `${prefix}-${i}`;
    const hintId = property.description ? `${id}-hint` : undefined;
    const control = input(name, property, kind, required.has(name), hintId, id);
    fields.push({ name, kind, control, property });
    const label = h("label", { for: id, class: "option-name" },
      h("code", {}, name),
      required.has(name) && h("span", { class: "required", title: "required" }, " *"),
      property.secret === true && h("span", { class: "tag" }, "secret"));
    return h("div", { class: kind === "boolean" ? "option option-check" : "option" },
      label, control,
      hintId && h("p", { id: hintId, class: "muted small hint" }, property.description));
  });
  const element = h("div", { class: "schema-form" },
    rows.length ? rows : h("p", { class: "muted small" }, "No options to set."),
    required.size > 0 && h("p", { class: "muted small" }, "* required"));

  function values() {
    const out = {};
    for (const { name, kind, control, property } of fields) {
      if (kind === "boolean") {
        if (control.checked !== (property.default === true)) {
          out[name] = text ? String(control.checked) : control.checked;
        }
      } else if (control.value.trim() !== "") {
        const value = control.value.trim();
        out[name] = kind === "number" && !text && Number.isFinite(Number(value))
          ? Number(value) : value;
      }
    }
    return out;
  }

  return { element, values };
}
