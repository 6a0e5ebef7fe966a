// /udfs: the saved UDFs (Arroyo's /api/v1/udfs), and an editor that validates a new one as it
// is typed, its diagnostics underlined at their lines, then saves it.

import { udfEditor } from "./editor.js";
import {
  $, api, fmtTime, h, hide, poller, renderIfChanged, showError, showText, showValidity,
} from "./util.js";

const HINT = `from arroyo_udf import udf

@udf
def double_it(x: int) -> int:
    return 2 * x
`;

/**
 * The page, built once (its editor keeps what the user typed while they look elsewhere);
 * `show()` lists the saved UDFs until the `stop()` of what it returns.
 */
export function udfsPage() {
  let refresh = () => {};
  const editor = udfEditor($("udf-editor"), {
    label: "UDF",
    hint: HINT,
    validate: (definition) => api("POST", "/udfs/validate", { definition }),
    onValidated: (result, err) => showValidity($("udf-live"), result, err,
      () => `Valid: defines ${result.udf_name}.`),
  });

  async function save() {
    hide($("udf-alert"));
    hide($("udf-status"));
    $("udf-save").disabled = true;
    try {
      const saved = await api("POST", "/udfs", {
        definition: editor.text(), description: $("udf-description").value,
      });
      showText($("udf-status"), `Saved ${saved.name}: every pipeline may call it now.`);
      editor.setText("");
      $("udf-description").value = "";
      refresh();
    } catch (err) {
      showError($("udf-alert"), "Could not save the UDF", err);
    } finally {
      $("udf-save").disabled = false;
    }
  }

  async function remove(udf) {
    if (!confirm(`Delete UDF ${udf.name}? Pipelines that use it keep their copy.`)) return;
    try {
      await api("DELETE", `/udfs/${encodeURIComponent(udf.id)}`);
      showText($("udf-status"), `Deleted ${udf.name}.`);
      refresh();
    } catch (err) {
      showError($("udfs-alert"), `Could not delete ${udf.name}`, err);
    }
  }

  $("udf-save").addEventListener("click", save);

  return {
    show() {
      $("udfs-view").hidden = false;
      $("udfs-loading").hidden = false;
      const poll = poller(async (stopped) => {
        try {
          const list = await api("GET", "/udfs");
          if (stopped()) return;
          $("udfs-loading").hidden = true;
          hide($("udfs-alert"));
          renderIfChanged($("udfs"), list.data, (udfs) => udfs.map((u) =>
            h("tr", { "data-udf": u.name },
              h("td", {}, h("code", {}, u.name)),
              h("td", {}, u.description),
              h("td", { class: "muted" }, fmtTime(u.created_at)),
              h("td", {}, h("button", { type: "button", onclick: () => remove(u) }, "Delete")))));
          $("udfs-empty").hidden = list.data.length > 0;
        } catch (err) {
          if (stopped()) return;
          $("udfs-loading").hidden = true;
          showError($("udfs-alert"), "Could not list the UDFs", err);
        }
      });
      refresh = poll.now;
      return {
        stop() {
          poll.stop();
          refresh = () => {};
          $("udfs-view").hidden = true;
        },
      };
    },
  };
}
