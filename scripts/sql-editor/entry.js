// The console's SQL editor: CodeMirror 6 with Spark SQL highlighting and completion of the
// tables and columns the signed-in user may read (the page hands them over once loaded).
// Built into one file by build.sh; the page never loads anything from outside the console.
import { EditorView, basicSetup } from "codemirror";
import { keymap } from "@codemirror/view";
import { Compartment, Prec } from "@codemirror/state";
import { sql, SQLDialect, MySQL } from "@codemirror/lang-sql";

// Spark SQL: MySQL's words (backtick identifiers, RLIKE, DIV...) plus Spark's own.
const SPARK_KEYWORDS =
  "lateral view explode posexplode inline cluster distribute sort pivot unpivot tablesample " +
  "qualify rollup cube grouping sets anti semi ilike timestamp_ntz version system_time";
const SPARK_FUNCTIONS =
  "abs acos add_months aggregate approx_count_distinct approx_percentile array array_contains " +
  "array_distinct array_join array_max array_min array_position array_remove array_sort " +
  "arrays_zip avg bround cardinality cast ceil coalesce collect_list collect_set concat " +
  "concat_ws contains corr count count_if date_add date_diff date_format date_part date_sub " +
  "date_trunc datediff day dayofmonth dayofweek dayofyear decode dense_rank element_at " +
  "endswith exists exp explode explode_outer filter first flatten floor forall format_number " +
  "from_json from_unixtime from_utc_timestamp get_json_object greatest hash hour if ifnull " +
  "initcap instr isnan isnotnull isnull json_tuple lag last last_day lead least left length " +
  "levenshtein like locate log lower lpad ltrim make_date map map_keys map_values max max_by " +
  "md5 mean median min min_by minute mod month months_between named_struct nanvl next_day " +
  "now ntile nullif nvl nvl2 percent_rank percentile percentile_approx pmod posexplode pow " +
  "power quarter rand rank regexp_extract regexp_extract_all regexp_like regexp_replace " +
  "repeat replace reverse right round row_number rpad rtrim second sequence sha1 sha2 shuffle " +
  "size slice sort_array split split_part sqrt startswith stddev stddev_pop stddev_samp " +
  "struct substr substring substring_index sum to_date to_json to_timestamp to_unix_timestamp " +
  "to_utc_timestamp transform translate trim trunc try_cast try_divide typeof ucase unbase64 " +
  "unix_timestamp upper uuid var_pop var_samp variance weekday weekofyear when window year zip_with";

export const SparkSQL = SQLDialect.define({
  ...MySQL.spec,
  keywords: MySQL.spec.keywords + " " + SPARK_KEYWORDS,
  types: MySQL.spec.types + " string binary map struct array interval timestamp_ntz",
  builtin: SPARK_FUNCTIONS,
  hashComments: false,
  spaceAfterDashes: false,
});

// Replaces `textarea` with an editor that keeps the textarea's value current (the form posts
// the textarea, so the page works the same with or without this script).
// Returns {view, setSchema(namespace), setValue(text)}.
export function sqlEditor(textarea, options) {
  const opts = options || {};
  const language = new Compartment();
  // Columns of the tables the statement names (FROM/JOIN), completed without a table prefix.
  const columnsInScope = (schema) => (context) => {
    const word = context.matchBefore(/[A-Za-z0-9_]*/); // empty on Ctrl+Space after a space
    if (!word || (word.from === word.to && !context.explicit)) return null;
    const before = context.state.sliceDoc(word.from - 1, word.from);
    if (before === "." || before === "`") return null; // qualified names: lang-sql answers those
    const text = context.state.doc.toString();
    const seen = new Map();
    for (const m of text.matchAll(/\b(?:from|join)\s+`?([A-Za-z0-9_]+)`?\s*\.\s*`?([A-Za-z0-9_]+)`?/gi)) {
      const cols = schema && schema[m[1].toLowerCase()] && schema[m[1].toLowerCase()][m[2].toLowerCase()];
      for (const c of cols || []) if (!seen.has(c.label)) seen.set(c.label, { ...c, boost: 10 });
    }
    return seen.size ? { from: word.from, options: [...seen.values()], validFor: /^[A-Za-z0-9_]*$/ } : null;
  };
  const config = (schema) => [
    sql({ dialect: SparkSQL, schema: schema || {}, upperCaseKeywords: true }),
    SparkSQL.language.data.of({ autocomplete: columnsInScope(schema) }),
  ];
  const run = () => {
    if (opts.onRun) { opts.onRun(); return true; }
    return false;
  };
  const view = new EditorView({
    doc: textarea.value,
    extensions: [
      Prec.highest(keymap.of([{ key: "Mod-Enter", run }, { key: "Shift-Enter", run }])),
      basicSetup,
      language.of(config(null)),
      EditorView.lineWrapping,
      EditorView.updateListener.of((update) => {
        if (update.docChanged) textarea.value = update.state.doc.toString();
      }),
      EditorView.contentAttributes.of({ "aria-label": "SQL statement", spellcheck: "false" }),
    ],
  });
  textarea.style.display = "none";
  textarea.removeAttribute("required"); // a hidden required field would block the form silently
  textarea.parentNode.insertBefore(view.dom, textarea);
  return {
    view,
    setSchema(schema) {
      view.dispatch({ effects: language.reconfigure(config(schema)) });
    },
    setValue(text) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    },
    insert(text) {
      view.dispatch(view.state.replaceSelection(text));
      view.focus();
    },
  };
}
