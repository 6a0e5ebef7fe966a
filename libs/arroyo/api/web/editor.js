// The code editors: CodeMirror 6 (vendor/codemirror.js) with highlighting, line numbers and
// bracket matching, the text validated as it is typed (debounced, through the caller's
// `validate`), each diagnostic underlined at its line and column with its message on hover.
// The SQL editor also completes the tables, columns and functions the last validation found,
// the connectors and their options, and SQL's keywords; Mod-Enter previews, Mod-Shift-Enter
// launches. The UDF editor edits Python.

import {
  EditorState, Compartment, EditorView, keymap, lineNumbers, highlightActiveLine,
  highlightActiveLineGutter, drawSelection, placeholder, defaultKeymap, history, historyKeymap,
  indentWithTab, bracketMatching, indentOnInput, syntaxHighlighting, defaultHighlightStyle,
  closeBrackets, closeBracketsKeymap, autocompletion, completionKeymap, linter, lintGutter,
  forceLinting, searchKeymap, sql, StandardSQL, keywordCompletionSource, schemaCompletionSource,
  python,
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
function connectorCompletions(known) {
  return (context) => {
    const connectors = known();
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

/** Completes the functions a query may call (validate_query's `functions`), with a "(". */
function functionCompletions(names) {
  const options = names.map((name) => ({ label: name, type: "function", apply: `${name}(` }));
  return (context) => {
    const word = context.matchBefore(/\w+$/);
    if (!word || (word.from === word.to && !context.explicit)) return null;
    return { from: word.from, options, validFor: /^\w*$/ };
  };
}

/** An API's diagnostics (1-based line and column) as CodeMirror's, each over its word. */
function toLint(state, diagnostics) {
  return diagnostics.map((d) => {
    const from = d.line == null ? 0 : offsetOf(state.doc, d.line, d.column);
    const word = state.wordAt(from);
    const to = word && word.to > from ? word.to : Math.min(state.doc.length, from + 1);
    return { from, to: Math.max(to, from), severity: "error", message: d.message, source: d.code };
  });
}

/**
 * A linter that validates the text (`validate(text)`, debounced), tells `onValidated(result,
 * err)`, and underlines the diagnostics `diagnosticsOf(result, view)` picks from the answer.
 */
function validating(validate, onValidated, diagnosticsOf) {
  return linter(async (view) => {
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
    return toLint(view.state, diagnosticsOf(result, view));
  }, { delay: VALIDATE_DELAY_MS });
}

/** An editor of `language` in `parent`, and the calls the pages make on it. */
function makeEditor(parent, { label, hint, language, lint, keys, more }) {
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc: "",
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), history(), drawSelection(), indentOnInput(),
        bracketMatching(), closeBrackets(), highlightActiveLine(),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        language, lint, lintGutter(), placeholder(hint || ""), ...(more || []),
        keymap.of([
          ...(keys || []), ...closeBracketsKeymap, ...defaultKeymap, ...searchKeymap,
          ...historyKeymap, ...completionKeymap, indentWithTab,
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
    /** Puts `text` at the cursor (over the selection), the cursor after it. */
    insert(text) {
      view.dispatch(view.state.replaceSelection(text));
      view.focus();
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

/**
 * A Python UDF file's editor in `parent`: `validate(text)` resolves to
 * `{ udf_name, errors, diagnostics: [{line, column, message, code}] }`, each told to
 * `onValidated(result, err)`.
 */
export function udfEditor(parent, { label, hint, validate, onValidated }) {
  const lint = validating(validate, onValidated, (result) => result.diagnostics || []);
  return makeEditor(parent, { label, hint, language: python(), lint });
}

/**
 * Makes the SQL editor in `parent`.
 * - `label`: its accessible name;
 * - `validate(text)`: resolves to `{ errors: [{line, column, message, code}], tables,
 *   functions }`;
 * - `onPreview()`, `onLaunch()`: the keyboard shortcuts' actions;
 * - `onValidated(result)`: told each validation's result (or error).
 */
export function sqlEditor(parent, { label, hint, validate, onPreview, onLaunch, onValidated }) {
  const schema = new Compartment();
  let connectors = [];

  const lint = validating(validate, onValidated, (result, view) => {
    const columns = Object.fromEntries(
      (result.tables || []).map((t) => [t.name, t.columns.map((c) => c.name)]));
    view.dispatch({ effects: schema.reconfigure(completions(columns, result.functions || [])) });
    return result.errors || [];
  });

  function completions(tables, functions) {
    return autocompletion({
      override: [
        connectorCompletions(() => connectors),
        schemaCompletionSource({ dialect: StandardSQL, schema: tables }),
        functionCompletions(functions),
        keywordCompletionSource(StandardSQL, true),
      ],
    });
  }

  const editor = makeEditor(parent, {
    label, hint, language: sql({ dialect: StandardSQL }), lint,
    more: [schema.of(completions({}, []))],
    keys: [
      { key: "Mod-Enter", preventDefault: true, run: () => { onPreview(); return true; } },
      { key: "Mod-Shift-Enter", preventDefault: true, run: () => { onLaunch(); return true; } },
    ],
  });

  return {
    ...editor,
    /** Each connector, for completion: GET /api/v1/connectors' `data`. */
    setConnectors(list) {
      connectors = list;
    },
  };
}
