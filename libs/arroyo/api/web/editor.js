// The SQL editor: CodeMirror 6 (vendor/codemirror.js) with SQL highlighting, line numbers and
// bracket matching; the query validated as it is typed (debounced, through the caller's
// `validate`), each diagnostic underlined at its line and column with its message on hover;
// completion of the tables and columns the last validation found, the connectors and their
// options, and SQL's keywords; Mod-Enter to preview, Mod-Shift-Enter to launch.

import {
  EditorState, Compartment, EditorView, keymap, lineNumbers, highlightActiveLine,
  highlightActiveLineGutter, drawSelection, placeholder, defaultKeymap, history, historyKeymap,
  indentWithTab, bracketMatching, indentOnInput, syntaxHighlighting, defaultHighlightStyle,
  closeBrackets, closeBracketsKeymap, autocompletion, completionKeymap, linter, lintGutter,
  forceLinting, searchKeymap, sql, StandardSQL, keywordCompletionSource, schemaCompletionSource,
} from "./vendor/codemirror.js";

// How long typing must pause before the query is validated.
const VALIDATE_DELAY_MS = 500;

/** The offset in `doc` of a 1-based line and column, kept inside the document. */
function offsetOf(doc, line, column) {
  const at = doc.line(Math.min(Math.max(1, line), doc.lines));
  return Math.min(at.from + Math.max(0, (column || 1) - 1), at.to);
}

/** The word an option or connector name is being typed in, with what comes before it. */
function quotedWord(context) {
  return context.matchBefore(/'[\w.]*$/);
}

/**
 * Completes connector names after `connector = '` and, inside a WITH (...) naming a
 * connector, that connector's options (from /api/v1/connectors).
 */
function connectorCompletions(connectors) {
  return (context) => {
    const word = quotedWord(context) || context.matchBefore(/\w[\w.]*$/);
    if (!word && !context.explicit) return null;
    const before = context.state.doc.sliceString(Math.max(0, context.pos - 2000), context.pos);
    if (/connector\s*=\s*'[\w.]*$/i.test(before)) {
      return {
        from: word.from + 1,
        options: connectors.map((c) => ({ label: c.name, type: "type", info: c.description })),
      };
    }
    const open = before.toUpperCase().lastIndexOf("WITH (");
    if (open < 0 || before.indexOf(")", open) >= 0) return null;
    const named = /connector\s*=\s*'([\w.]+)'/i.exec(context.state.doc.sliceString(
      open, Math.min(context.state.doc.length, context.pos + 2000)));
    const connector = named && connectors.find((c) => c.name === named[1]);
    if (!connector) return null;
    const start = word ? (word.text.startsWith("'") ? word.from + 1 : word.from) : context.pos;
    const properties = Object.entries(connector.options_schema?.properties || {});
    return {
      from: start,
      options: properties.map(([name, p]) => ({
        label: name, type: "property", detail: p.type, info: p.description || undefined,
      })),
    };
  };
}

/**
 * Makes an editor in `parent`.
 * - `label`: its accessible name;
 * - `validate(text)`: resolves to `{ errors: [{line, column, message, code}], tables }`;
 * - `onPreview()`, `onLaunch()`: the keyboard shortcuts' actions;
 * - `onValidated(result)`: told each validation's result (or error).
 */
export function sqlEditor(parent, { label, hint, validate, onPreview, onLaunch, onValidated }) {
  const schema = new Compartment();
  let connectors = [];

  const lint = linter(async (view) => {
    const text = view.state.doc.toString();
    if (!text.trim()) return [];
    let result;
    try {
      result = await validate(text);
    } catch (err) {
      onValidated?.(null, err);
      return [];
    }
    // Typed on since: the next run of the linter has the newer text.
    if (view.state.doc.toString() !== text) return [];
    onValidated?.(result, null);
    const columns = Object.fromEntries(
      (result.tables || []).map((t) => [t.name, t.columns.map((c) => c.name)]));
    view.dispatch({ effects: schema.reconfigure(completions(columns)) });
    return (result.errors || []).map((d) => {
      const from = d.line == null ? 0 : offsetOf(view.state.doc, d.line, d.column);
      const to = Math.min(view.state.doc.length, view.state.doc.lineAt(from).to > from
        ? view.state.wordAt(from)?.to ?? from + 1 : from + 1);
      return { from, to: Math.max(to, from), severity: "error", message: d.message, source: d.code };
    });
  }, { delay: VALIDATE_DELAY_MS });

  function completions(tables) {
    return autocompletion({
      override: [
        connectorCompletions(connectors),
        schemaCompletionSource({ dialect: StandardSQL, schema: tables }),
        keywordCompletionSource(StandardSQL, true),
      ],
    });
  }

  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc: "",
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), history(), drawSelection(), indentOnInput(),
        bracketMatching(), closeBrackets(), highlightActiveLine(),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        sql({ dialect: StandardSQL }), schema.of(completions({})), lint, lintGutter(),
        placeholder(hint || ""),
        keymap.of([
          { key: "Mod-Enter", preventDefault: true, run: () => { onPreview(); return true; } },
          { key: "Mod-Shift-Enter", preventDefault: true, run: () => { onLaunch(); return true; } },
          ...closeBracketsKeymap, ...defaultKeymap, ...searchKeymap, ...historyKeymap,
          ...completionKeymap, indentWithTab,
        ]),
        EditorView.contentAttributes.of({ "aria-label": label, "aria-multiline": "true" }),
        EditorView.lineWrapping,
      ],
    }),
  });

  return {
    view,
    text: () => view.state.doc.toString(),
    setText(text) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    },
    /** Each connector, for completion: GET /api/v1/connectors' `data`. */
    setConnectors(list) {
      connectors = list;
    },
    /** Validates now, rather than after the pause. */
    validateNow() {
      forceLinting(view);
    },
    /** Puts the caret on line:column and shows it. */
    jumpTo(line, column) {
      const at = offsetOf(view.state.doc, line, column);
      view.dispatch({ selection: { anchor: at }, scrollIntoView: true });
      view.focus();
    },
  };
}
