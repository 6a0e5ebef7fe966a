// The parts of CodeMirror 6 the web UI's SQL editor uses, bundled into one ES module
// (scripts/vendor-web): libs/arroyo/api/web/vendor/codemirror.js.
export { EditorState, Compartment } from "@codemirror/state";
export {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter,
  drawSelection, placeholder,
} from "@codemirror/view";
export { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
export {
  bracketMatching, indentOnInput, syntaxHighlighting, defaultHighlightStyle,
} from "@codemirror/language";
export { closeBrackets, closeBracketsKeymap, autocompletion, completionKeymap } from "@codemirror/autocomplete";
export { linter, lintGutter, forceLinting, diagnosticCount } from "@codemirror/lint";
export { searchKeymap } from "@codemirror/search";
export { sql, StandardSQL, keywordCompletionSource, schemaCompletionSource } from "@codemirror/lang-sql";
export { python } from "@codemirror/lang-python";
