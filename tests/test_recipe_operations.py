"""Recipe operations from the cloud data-prep action reference, and ConditionExpressions on
every step. Expected values are worked out here by hand or with Python's standard library."""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from shoal.recipes import JobError, RecipeError, apply_recipe, load_job_file


def step(op: str, conditions: list | None = None, **params) -> dict:
    s = {
        "Action": {
            "Operation": op,
            "Parameters": {k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()},
        }
    }
    if conditions:
        s["ConditionExpressions"] = conditions
    return s


def apply(df, *steps):
    return apply_recipe(df, list(steps), lambda ref: (_ for _ in ()).throw(AssertionError(ref)))


def rows(df, *cols):
    return [tuple(r) for r in df.select(*cols).collect()]


@pytest.fixture
def people(spark):
    data = [
        (1, "Ada Lovelace", "2024-03-10 12:00:00", "2024-03-20 18:30:00", "EU", 120.0, "https://ada.org/notes"),
        (2, "grace hopper", "2024-07-04 08:15:00", "2024-06-04 08:15:00", None, 80.5, "http://navy.mil/x"),
        (3, "Alan Turing", None, "2024-01-01 00:00:00", "EU", None, ""),
        (4, "Edsger Dijkstra", "2023-12-31 23:59:59", "2024-01-01 00:00:01", "NA", -42.0, None),
    ]
    return spark.createDataFrame(
        data, "id int, name string, start string, finish string, region string, score double, url string"
    )


@pytest.mark.slow  # over 30 s on the shared 2-core machine
def test_dates_and_times(people):
    df = apply(
        people,
        step(
            "CONVERT_TIMEZONE", sourceColumn="start", fromTimeZone="UTC", toTimeZone="Asia/Tokyo", targetColumn="tokyo"
        ),
        step(
            "CONVERT_TIMEZONE",
            sourceColumn="start",
            fromTimeZone="UTC+08:00",
            toTimeZone="UTC",
            targetColumn="utc",
            dateTimeFormat="yyyy-mm-dd HH:MM",
        ),
        step("DATE_DIFF", sourceColumn1="start", sourceColumn2="finish", units="DAYS", targetColumn="days"),
        step("DATE_DIFF", sourceColumn1="start", sourceColumn2="finish", units="HOURS", targetColumn="hours"),
        step("DATE_DIFF", value1="2020-01-01", value2="2020-10-06", units="DAYS", targetColumn="literal_days"),
        step("UNIX_TIME", sourceColumn="start", targetColumn="epoch"),
        step("UNIX_TIME_FORMAT", value="1601936554", targetColumn="from_epoch"),
    ).orderBy("id")

    def parse(s):
        return datetime.strptime(s, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC) if s else None

    def whole(seconds, unit):  # whole units, truncated toward zero
        return int(seconds / unit)

    expected = []
    for _, _, start, finish, *_ in people.orderBy("id").collect():
        a, b = parse(start), parse(finish)
        gap = (b - a).total_seconds() if a else None
        expected.append(
            (
                (a + timedelta(hours=9)).strftime("%Y-%m-%d %H:%M:%S") if a else None,
                (a - timedelta(hours=8)).strftime("%Y-%m-%d %H:%M") if a else None,
                whole(gap, 86400) if a else None,
                whole(gap, 3600) if a else None,
                (date(2020, 10, 6) - date(2020, 1, 1)).days,
                int(a.timestamp()) if a else None,
                datetime.fromtimestamp(1601936554, UTC).strftime("%Y-%m-%d %H:%M:%S"),
            )
        )
    got = rows(df, "tokyo", "utc", "days", "hours", "literal_days", "epoch", "from_epoch")
    assert got[1][2:4] == (-30, -720)  # row 2 ends a month before it starts
    assert got == expected
    with pytest.raises(RecipeError, match=r"step 1 \(CONVERT_TIMEZONE\): unknown time zone 'Mars/Base'"):
        apply(people, step("CONVERT_TIMEZONE", sourceColumn="start", toTimeZone="Mars/Base", targetColumn="x"))
    with pytest.raises(RecipeError, match="unknown units 'FORTNIGHTS'"):
        apply(people, step("DATE_DIFF", value1="2020-01-01", value2="2020-01-02", units="FORTNIGHTS", targetColumn="x"))


def test_date_constructors_and_now(spark):
    df = spark.createDataFrame([(2024, 2, 29, 13), (2023, 2, 29, 7), (1999, 12, 31, 23)], "y int, m int, d int, h int")
    out = apply(
        df,
        step(
            "DATE_TIME",
            dateTimeParameters={
                "year": {"sourceColumn": "y"},
                "month": {"sourceColumn": "m"},
                "day": {"sourceColumn": "d"},
                "hour": {"sourceColumn": "h"},
                "minute": {"value": "5"},
                "second": {},
            },
            targetColumn="dt",
        ),
        step(
            "DATE",
            dateTimeParameters={"year": {"sourceColumn": "y"}, "month": {"value": "1"}, "day": {"sourceColumn": "d"}},
            targetColumn="date",
        ),
        step(
            "TIME",
            dateTimeParameters={"hour": {"sourceColumn": "h"}, "minute": {"value": "30"}},
            dateTimeFormat="HH:MM",
            targetColumn="time",
        ),
        step("NOW", timeZone="Asia/Tokyo", targetColumn="now"),
        step("TODAY", targetColumn="today"),
    )

    def made(y, m, d, h):
        try:
            return datetime(y, m, d, h, 5, 0).strftime("%Y-%m-%d %H:%M:%S")
        except ValueError:  # 2023-02-29 does not exist
            return None

    got = sorted(rows(df.join(out, ["y", "m", "d", "h"]), "y", "m", "d", "h", "dt", "date", "time"))
    assert got == sorted(
        (y, m, d, h, made(y, m, d, h), date(y, 1, d).isoformat(), f"{h:02d}:30") for y, m, d, h in df.collect()
    )
    now, today = rows(out, "now", "today")[0]
    tokyo = datetime.now(UTC) + timedelta(hours=9)
    assert abs(datetime.strptime(now, "%Y-%m-%d %H:%M:%S") - tokyo.replace(tzinfo=None)) < timedelta(minutes=10)
    assert today in {(datetime.now(UTC) + timedelta(days=k)).date().isoformat() for k in (-1, 0)}


@pytest.mark.slow  # over 30 s on the shared 2-core machine
def test_columns_flags_and_text(people):
    df = apply(
        people,
        step("MOVE_TO_START", sourceColumn="score"),
        step("MOVE_TO_END", sourceColumn="id"),
        step("MOVE_AFTER", sourceColumn="url", targetColumn="score"),
        step("MOVE_BEFORE", sourceColumn="region", targetColumn="name"),
        step("MOVE_TO_INDEX", sourceColumn="finish", targetIndex="0"),
    )
    assert df.columns == ["finish", "score", "url", "region", "name", "start", "id"]
    df = apply(
        people,
        step("MERGE", sourceColumns=["name", "region"], delimiter=" / ", targetColumn="merged"),
        step("ADD_PREFIX", sourceColumn="region", pattern="r-"),
        step("ADD_SUFFIX", sourceColumn="name", pattern="!", targetColumn="shout"),
        step("FLAG_COLUMN_FROM_NULL", sourceColumn="score", flagType="Null values", targetColumn="no_score"),
        step(
            "FLAG_COLUMN_FROM_PATTERN",
            sourceColumn="url",
            flagType="Pattern",
            pattern="^https:",
            targetColumn="secure",
            trueString="yes",
            falseString="no",
        ),
        step("EXTRACT_PATTERN", sourceColumn="url", pattern=r"\.[a-z]+", targetColumn="tld"),
        step("EXTRACT_BETWEEN_DELIMITERS", sourceColumn="url", startPattern="//", endPattern="/", targetColumn="host"),
        step("EXTRACT_BETWEEN_POSITIONS", sourceColumn="name", startPosition="0", endPosition="3", targetColumn="n3"),
        step("REPLACE_BETWEEN_DELIMITERS", sourceColumn="url", startPattern="//", endPattern="/", value="$HOST"),
        step(
            "REPLACE_BETWEEN_POSITIONS",
            sourceColumn="name",
            startPosition="1",
            endPosition="3",
            value="**",
            targetColumn="hidden",
        ),
        step("LEFT", sourceColumn="name", position="4", targetColumn="left4"),
        step("RIGHT", sourceColumn="name", position="3", targetColumn="right3"),
        step("LEN", sourceColumn="name", targetColumn="len"),
        step("REPEAT_STRING", value="ab", count="3", targetColumn="rep"),
        step("CHAR", value="65", targetColumn="chr"),
        step("CHAR", value="8364", targetColumn="euro"),
        step("UNICODE", sourceColumn="name", targetColumn="code"),
        step("EXACT", sourceColumn1="region", value2="r-EU", targetColumn="is_eu"),
        step("STARTS_WITH", sourceColumn="name", pattern="A", targetColumn="starts_a"),
        step("PROPER", sourceColumn="name", targetColumn="proper"),
    ).orderBy("id")
    names = [r[0] for r in people.orderBy("id").select("name").collect()]
    regions = [r[0] for r in people.orderBy("id").select("region").collect()]
    assert rows(df, "merged") == [(f"{n} / {r}",) if r else (n,) for n, r in zip(names, regions, strict=True)]
    assert rows(df, "region") == [("r-" + r if r else None,) for r in regions]
    assert rows(df, "shout", "no_score") == [
        (n + "!", s) for n, s in zip(names, [False, False, True, False], strict=True)
    ]
    assert rows(df, "secure") == [("yes",), ("no",), ("no",), ("no",)]
    assert rows(df, "tld", "host") == [(".org", "ada.org"), (".mil", "navy.mil"), (None, None), (None, None)]
    assert rows(df, "url") == [("https://$HOST/notes",), ("http://$HOST/x",), ("",), (None,)]
    assert rows(df, "n3", "hidden") == [(n[:3], n[0] + "**" + n[3:]) for n in names]
    assert rows(df, "left4", "right3", "len") == [(n[:4], n[-3:], len(n)) for n in names]
    assert rows(df, "rep", "chr", "euro", "code") == [("ababab", chr(65), chr(8364), ord(n[0])) for n in names]
    assert rows(df, "is_eu", "starts_a") == [(True, True), (False, False), (True, True), (False, False)]
    assert rows(df, "proper") == [(n.title(),) for n in names]


def test_splits(spark):
    df = spark.createDataFrame([(1, "abcdefghij"), (2, "xyz"), (3, None)], "id int, s string")
    got = apply(df, step("SPLIT_COLUMN_FROM_START", sourceColumn="s", position="4")).orderBy("id")
    assert got.columns == ["id", "s_1", "s_2"]
    assert rows(got, "s_1", "s_2") == [("abcd", "efghij"), ("xyz", ""), (None, None)]
    got = apply(df, step("SPLIT_COLUMN_FROM_END", sourceColumn="s", position="4")).orderBy("id")
    assert rows(got, "s_1", "s_2") == [("abcdef", "ghij"), ("", "xyz"), (None, None)]
    got = apply(df, step("SPLIT_COLUMN_BETWEEN_POSITIONS", sourceColumn="s", startPosition="2", endPosition="5"))
    assert rows(got.orderBy("id"), "s_1", "s_2", "s_3") == [("ab", "cde", "fghij"), ("xy", "z", ""), (None, None, None)]
    got = apply(df, step("SPLIT_COLUMN_WITH_INTERVALS", sourceColumn="s", startPosition="1", interval="4")).orderBy(
        "id"
    )
    text = "abcdefghij"
    assert got.columns == ["id", "s_1", "s_2", "s_3", "s_4"]
    assert rows(got, "s_1", "s_2", "s_3", "s_4")[0] == (text[:1], text[1:5], text[5:9], text[9:])
    assert rows(got, "s_1", "s_2", "s_3", "s_4")[1] == ("x", "yz", "", "")


@pytest.mark.slow  # over 30 s on the shared 2-core machine
def test_fills_duplicates_and_windows(spark):
    data = [(1, "a", 10.0), (2, None, None), (3, "b", 30.0), (4, "a", None), (5, None, 50.0), (6, "b", 30.0)]
    df = spark.createDataFrame(data, "id int, k string, v double").coalesce(1)
    out = apply(
        df,
        step("FLAG_DUPLICATES_IN_COLUMN", sourceColumn="k", targetColumn="dup_k", trueString="Y", falseString="N"),
        step("FILL_WITH_LAST_VALID", sourceColumn="k", columnDataType="string"),
        step("ROLLING_SUM", sourceColumn="v", numRowsBefore="1", numRowsAfter="1", targetColumn="sum3"),
        step("ROLLING_AVERAGE", sourceColumn="v", numRowsBefore="2", numRowsAfter="0", targetColumn="avg3"),
        step("ROLLING_COUNT_A", sourceColumn="v", numRowsBefore="1", numRowsAfter="0", targetColumn="cnt2"),
        step("PREV", sourceColumn="id", targetColumn="prev"),
        step("NEXT", sourceColumn="id", numRows="2", targetColumn="next2"),
        step("FILL", sourceColumn="v", numRowsBefore="1", numRowsAfter="1", targetColumn="v_fill"),
    ).orderBy("id")
    vs = [r[2] for r in data]

    def window(i, before, after):
        return [x for x in vs[max(0, i - before) : i + after + 1] if x is not None]

    seen, dup = set(), []
    for _, k, _ in data:
        dup.append("Y" if k in seen else "N")
        seen.add(k)
    last, filled = None, []
    for _, k, _ in data:
        last = k if k is not None else last
        filled.append(last)
    assert rows(out, "dup_k") == [(d,) for d in dup]
    assert rows(out, "k") == [(k,) for k in filled]
    assert rows(out, "sum3") == [(sum(window(i, 1, 1)) if window(i, 1, 1) else None,) for i in range(6)]
    assert rows(out, "avg3") == [(sum(w) / len(w) if (w := window(i, 2, 0)) else None,) for i in range(6)]
    assert rows(out, "cnt2") == [(len(window(i, 1, 0)),) for i in range(6)]
    assert rows(out, "prev", "next2") == [
        (i - 1 if i > 1 else None, i + 2 if i + 2 <= 6 else None) for i in range(1, 7)
    ]
    assert rows(out, "v_fill") == [(10.0,), (10.0,), (30.0,), (30.0,), (50.0,), (30.0,)]

    dups = apply(
        df.select("k", "v"), step("FLAG_DUPLICATE_ROWS", targetColumn="dup", trueString="TRUE", falseString="FALSE")
    )
    flagged = rows(dups.where("dup = 'TRUE'"), "k", "v")
    assert flagged == [("b", 30.0)] and dups.count() == 6

    modes = spark.createDataFrame([(1,), (2,), (2,), (3,), (3,), (4,), (None,)], "x int")
    for kind, expected in (("MINIMUM", 2), ("MAXIMUM", 3), ("AVERAGE", 2)):  # 2.5 cast back to int
        filled = apply(modes, step("FILL_WITH_MODE", sourceColumn="x", modeType=kind))
        assert sorted(r[0] for r in filled.collect()) == sorted([1, 2, 2, 3, 3, 4, expected])


def test_boolean_and_case_operations(people):
    df = apply(
        people,
        step(
            "BOOLEAN_OPERATION",
            trueValueExpression="big",
            falseValueExpression="small",
            valueExpression="`score` > 100",
            targetColumn="size",
        ),
        step(
            "BOOLEAN_OPERATION",
            trueValueExpression="`name`",
            falseValueExpression="`:avg_score`",
            valueExpression="`score` > `:avg_score`",
            withExpressions=json.dumps([{"name": "avg_score", "value": "avg(`score`)", "type": "aggregate"}]),
            targetColumn="above",
        ),
        step(
            "CASE_OPERATION",
            valueExpression="case when `score` < 0 then 'negative' when `score` < 100 then 'low' else 'high' end",
            targetColumn="band",
        ),
    ).orderBy("id")
    mean = (120.0 + 80.5 - 42.0) / 3
    assert rows(df, "size") == [("big",), ("small",), ("small",), ("small",)]
    above = [r[0] for r in rows(df, "above")]
    assert above[:2] == ["Ada Lovelace", "grace hopper"]
    assert [math.isclose(float(v), mean) for v in above[2:]] == [True, True]
    assert rows(df, "band") == [("high",), ("low",), ("high",), ("negative",)]
    with pytest.raises(RecipeError, match="not defined in withExpressions"):
        apply(people, step("BOOLEAN_OPERATION", valueExpression="`score` > `:nope`", targetColumn="x"))
    with pytest.raises(RecipeError, match="calls java_method, which recipes may not use"):
        apply(
            people,
            step("BOOLEAN_OPERATION", valueExpression="java_method('java.lang.Math', 'random') > 0", targetColumn="x"),
        )
    with pytest.raises(RecipeError, match="must not contain a query"):
        apply(people, step("CASE_OPERATION", valueExpression="case when (select 1) = 1 then 1 end", targetColumn="x"))


def test_hash_and_mask(people):
    df = apply(
        people,
        step("DUPLICATE", sourceColumn="name", targetColumn="h256"),
        step("DUPLICATE", sourceColumn="name", targetColumn="hmd5"),
        step("CRYPTOGRAPHIC_HASH", sourceColumns=["h256"], algorithm="SHA256"),
        step("CRYPTOGRAPHIC_HASH", sourceColumns=["hmd5"], algorithm="MD5"),
        step("DUPLICATE", sourceColumn="name", targetColumn="m1"),
        step("DUPLICATE", sourceColumn="name", targetColumn="m2"),
        step("DUPLICATE", sourceColumn="url", targetColumn="m3"),
        step("MASK_RANGE", sourceColumns=["m1"], maskSymbol="#", start="2", stop="-2", alphabet=["WHITESPACE"]),
        step("MASK_RANGE", sourceColumns=["m2"], maskSymbol="*"),
        step(
            "MASK_DELIMITER",
            sourceColumns=["m3"],
            maskSymbol="x",
            startDelimiter="//",
            endDelimiter="/",
            alphabet=["SYMBOLS"],
        ),
        step("MASK_DATE", sourceColumns=["start"], maskSymbol="#", redact=["YEAR", "HOUR", "MINUTE"]),
        step("DUPLICATE", sourceColumn="name", targetColumn="m4"),
        step("DUPLICATE", sourceColumn="name", targetColumn="m5"),
        step("MASK_CUSTOM", sourceColumns=["m4"], maskSymbol="#", customValue="a"),
        step("MASK_CUSTOM", sourceColumns=["m5"], maskSymbol="?", customValue="[A-Z][a-z]", regex="true"),
    ).orderBy("id")
    names = [r[0] for r in people.orderBy("id").select("name").collect()]
    urls = [r[0] for r in people.orderBy("id").select("url").collect()]
    assert rows(df, "h256", "hmd5") == [
        (hashlib.sha256(n.encode()).hexdigest(), hashlib.md5(n.encode()).hexdigest()) for n in names
    ]

    def mask(s, a, b, keep_space):
        return s[:a] + "".join(c if keep_space and c.isspace() else "#" for c in s[a:b]) + s[b:]

    assert rows(df, "m1") == [(mask(n, 2, len(n) - 2, True),) for n in names]
    assert rows(df, "m2") == [("*" * len(n),) for n in names]
    starts = [r[0] for r in people.orderBy("id").select("start").collect()]
    assert rows(df, "start") == [(f"####-{v[5:11]}##:##:{v[17:]}" if v else None,) for v in starts]
    assert rows(df, "m4", "m5") == [(n.replace("a", "#"), re.sub("[A-Z][a-z]", "??", n)) for n in names]
    # Symbols are kept (alphabet SYMBOLS), so the dots of the host names stay.
    assert rows(df, "m3") == [("https://xxx.xxx/notes",), ("http://xxxx.xxx/x",), ("",), (None,)]
    assert [u.split("/")[2] for u in urls[:2]] == ["ada.org", "navy.mil"]
    with pytest.raises(RecipeError, match=r"step 1 \(CRYPTOGRAPHIC_HASH\): algorithm HMAC_SHA256 needs a secret"):
        apply(people, step("CRYPTOGRAPHIC_HASH", sourceColumns=["name"], secretId="arn:aws:secretsmanager:x"))


def test_nest_and_unnest(people):
    df = apply(
        people.where("id = 1"),
        step("NEST_TO_ARRAY", sourceColumns=["name", "region"], targetColumn="arr"),
        step("NEST_TO_MAP", sourceColumns=["name", "score"], targetColumn="m"),
        step("NEST_TO_STRUCT", sourceColumns=["name", "score"], targetColumn="st", removeSourceColumns="true"),
        step("UNNEST_STRUCT", sourceColumn="st", removeSourceColumn="true"),
        step("UNNEST_MAP", sourceColumn="m", targetColumn="mm"),
        step("UNNEST_ARRAY", sourceColumn="arr", targetColumn="item"),
    )
    assert "st" not in df.columns and "name" not in df.columns
    assert rows(df, "`st.name`", "`st.score`", "`mm.name`", "`mm.score`", "item") == [
        ("Ada Lovelace", 120.0, "Ada Lovelace", "120.0", "Ada Lovelace"),
        ("Ada Lovelace", 120.0, "Ada Lovelace", "120.0", "EU"),
    ]
    nested = people.sparkSession.createDataFrame(
        [(1, {"name": "Ammy", "address": {"state": "CA", "zipcode": 12345}})],
        "id int, user struct<name: string, address: struct<state: string, zipcode: int>>",
    )
    flat = apply(
        nested,
        step("UNNEST_STRUCT_N", sourceColumns=["user"], unnestLevel="2", delimiter="/", removeSourceColumn="true"),
    )
    assert flat.columns == ["id", "user/name", "user/address/state", "user/address/zipcode"]
    assert rows(flat, "`user/name`", "`user/address/state`", "`user/address/zipcode`") == [("Ammy", "CA", 12345)]
    one = apply(nested, step("UNNEST_STRUCT_N", sourceColumns=["user"], unnestLevel="1"))
    assert one.columns == ["id", "user", "user.name", "user.address"]
    with pytest.raises(RecipeError, match="not an array"):
        apply(people, step("UNNEST_ARRAY", sourceColumn="name", targetColumn="x"))


def test_transpose_encoding_and_buckets(spark):
    grades = spark.createDataFrame(
        [("Ms A", 90, 70, 60), ("Mr B", 80, 75, 65)], "Teacher string, Tom int, John int, Harry int"
    )
    t = apply(
        grades,
        step(
            "TRANSPOSE",
            pivotColumns=["Teacher"],
            valueColumns=["Tom", "John", "Harry"],
            aggregateFunction="SUM",
            newColumn="Student",
        ),
    )
    assert sorted(t.columns) == ["Mr B", "Ms A", "Student"]
    assert rows(t, "Student", "`Ms A`", "`Mr B`") == [("Tom", 90, 80), ("John", 70, 75), ("Harry", 60, 65)]

    sizes = spark.createDataFrame(
        [(i, s) for i, s in enumerate(["L", "XL", "M", "S", "M", None])], "id int, size string"
    )
    enc = apply(sizes, step("ONE_HOT_ENCODING", sourceColumn="size")).orderBy("id")
    assert set(enc.columns) == {"id", "size", "size_L", "size_M", "size_S", "size_XL"}
    for r in enc.collect():
        assert [r[f"size_{v}"] for v in ("S", "M", "L", "XL")] == [int(r["size"] == v) for v in ("S", "M", "L", "XL")]
    many = spark.createDataFrame([(str(i),) for i in range(11)], "v string")
    with pytest.raises(RecipeError, match="more than 10 distinct values"):
        apply(many, step("ONE_HOT_ENCODING", sourceColumn="v"))

    levels = spark.createDataFrame([(x,) for x in [-5.0, 1.9, 2.0, 19.0, 20.0, 500.0, None]], "level double")
    b = apply(
        levels,
        step(
            "BUCKETIZATION",
            sourceColumn="level",
            targetColumn="bin",
            bucketNames=["Bin1", "Bin2", "Bin3"],
            splits=["-Infinity", "2", "20", "Infinity"],
        ),
    )
    assert dict(rows(b, "level", "bin")) == {
        -5.0: "Bin1",
        1.9: "Bin1",
        2.0: "Bin2",
        19.0: "Bin2",
        20.0: "Bin3",
        500.0: "Bin3",
        None: None,
    }
    nums = spark.createDataFrame([(float(x),) for x in range(1, 11)], "n double")
    halves = dict(
        rows(
            apply(
                nums,
                step(
                    "BUCKETIZATION", sourceColumn="n", targetColumn="half", bucketNames=["low", "high"], percentage="50"
                ),
            ),
            "n",
            "half",
        )
    )
    assert [halves[float(x)] for x in range(1, 11)] == ["low"] * 5 + ["high"] * 5


def test_math_functions(spark):
    df = spark.createDataFrame([(1, 2.5), (2, -3.0), (3, 100.0), (4, None)], "id int, x double")
    out = apply(
        df,
        step("CEILING", sourceColumn="x", targetColumn="ceil"),
        step("FLOOR", sourceColumn="x", targetColumn="floor"),
        step("LOG", sourceColumn="x", base="10", targetColumn="log10"),
        step("LN", sourceColumn="x", targetColumn="ln"),
        step("POWER", sourceColumn="x", exponent="2", targetColumn="sq"),
        step("SQUARE_ROOT", sourceColumn="x", targetColumn="root"),
        step("SIGN", sourceColumn="x", targetColumn="sign"),
        step("NEGATE", sourceColumn="x", targetColumn="neg"),
        step("IS_EVEN", sourceColumn="x", targetColumn="even"),
        step("IS_ODD", sourceColumn="x", targetColumn="odd"),
        step("EXPONENT", value="1", targetColumn="e"),
        step("RANDOM_BETWEEN", lowerBound="5", upperBound="7", targetColumn="rnd"),
    ).orderBy("id")
    xs = [2.5, -3.0, 100.0, None]

    def maybe(f, x):
        try:
            return None if x is None else f(x)
        except ValueError:
            return None

    got = rows(out, "ceil", "floor", "log10", "ln", "sq", "root", "sign", "neg", "even", "odd", "e")
    for x, g in zip(xs, got, strict=True):
        want = (
            maybe(math.ceil, x),
            maybe(math.floor, x),
            maybe(math.log10, x),
            maybe(math.log, x),
            maybe(lambda v: v * v, x),
            maybe(math.sqrt, x),
            maybe(lambda v: (v > 0) - (v < 0), x),
            maybe(lambda v: -v, x),
            False if x is None else (x == int(x) and int(x) % 2 == 0),
            False if x is None else (x == int(x) and int(x) % 2 == 1),
            math.e,
        )
        assert g[:2] == want[:2] and g[4:10] == want[4:10] and math.isclose(g[10], want[10])
        assert (g[2] is None and want[2] is None) or math.isclose(g[2], want[2])
        assert (g[3] is None and want[3] is None) or math.isclose(g[3], want[3])
    assert all(5 <= r[0] <= 7 for r in rows(out, "rnd"))


def test_more_functions(spark):
    df = spark.createDataFrame([(1, "ab-c!", 90.0), (2, "x y", -2.7), (3, "zz", 4.0)], "id int, t string, x double")
    data = [(1, "ab-c!", 90.0), (2, "x y", -2.7), (3, "zz", 4.0)]
    out = apply(
        df,
        step("DEGREES", value=str(math.pi), targetColumn="deg"),
        step("RADIANS", sourceColumn="x", targetColumn="rad"),
        step("TRUNCATE", sourceColumn="x", targetColumn="trunc"),
        step("PI", targetColumn="pi"),
        step("RANDOM", targetColumn="rand"),
        step("LOWER", value="MiXeD", targetColumn="low"),
        step("UPPER", sourceColumn="t", targetColumn="up"),
        step("ENDS_WITH", sourceColumn="t", pattern="!", targetColumn="bang"),
        step("REMOVE_SYMBOLS", sourceColumn="t", targetColumn="clean"),
        step("SUBSTRING", sourceColumn="t", startPosition="1", endPosition="3", targetColumn="sub"),
        step("MERGE_COLUMNS_AND_VALUES", sourceColumns=["t", "id"], delimiter=" was ", targetColumn="m"),
        step("ROLLING_MIN", sourceColumn="x", numRowsBefore="1", numRowsAfter="1", targetColumn="rmin"),
        step("ROLLING_MAX", sourceColumn="x", numRowsBefore="0", numRowsAfter="1", targetColumn="rmax"),
        step("ROLLING_STANDARD_DEVIATION", sourceColumn="x", numRowsBefore="2", numRowsAfter="0", targetColumn="rsd"),
        step("ROLLING_VARIANCE", sourceColumn="x", numRowsBefore="2", numRowsAfter="0", targetColumn="rvar"),
        step("ROLLING_MODE", sourceColumn="t", numRowsBefore="0", numRowsAfter="0", targetColumn="rmode"),
    ).orderBy("id")
    xs = [r[2] for r in data]
    got = [r.asDict() for r in out.collect()]
    for i, (g, (_, t, x)) in enumerate(zip(got, data, strict=True)):
        assert math.isclose(g["deg"], 180.0) and math.isclose(g["rad"], math.radians(x))
        assert g["trunc"] == math.trunc(x) and math.isclose(g["pi"], math.pi) and 0 <= g["rand"] < 1
        assert (g["low"], g["up"], g["bang"]) == ("mixed", t.upper(), t.endswith("!"))
        assert (g["clean"], g["sub"], g["m"]) == (
            "".join(c for c in t if c.isalnum() or c.isspace()),
            t[1:3],
            f"{t} was {i + 1}",
        )
        assert g["rmin"] == min(xs[max(0, i - 1) : i + 2]) and g["rmax"] == max(xs[i : i + 2])
        window = xs[max(0, i - 2) : i + 1]
        if len(window) > 1:
            mean = sum(window) / len(window)
            var = sum((v - mean) ** 2 for v in window) / (len(window) - 1)
            assert math.isclose(g["rvar"], var) and math.isclose(g["rsd"], math.sqrt(var))
        else:
            assert g["rvar"] is None and g["rsd"] is None
        assert g["rmode"] == t


def test_aggregate_functions_across_columns(spark):
    data = [(1, 1.0, "4", 4), (2, None, "x", 7), (3, 2.0, None, 2), (4, None, None, None)]
    df = spark.createDataFrame(data, "id int, a double, b string, c int")
    cols = ["a", "b", "c"]
    ops = ["SUM", "AVERAGE", "MIN", "MAX", "MEDIAN", "MODE", "VARIANCE", "STANDARD_DEVIATION"]
    out = apply(
        df,
        *[step(op, sourceColumns=cols, targetColumn=op.lower()) for op in ops],
        step("KTH_LARGEST", sourceColumns=cols, value="2", targetColumn="k2"),
        step("KTH_LARGEST_UNIQUE", sourceColumns=cols, value="2", targetColumn="k2u"),
        step("COUNT", sourceColumns=cols, targetColumn="count"),
        step("COUNT_DISTINCT", sourceColumns=cols, targetColumn="count_distinct"),
        step("ANY", sourceColumns=cols, targetColumn="any"),
    ).orderBy("id")

    def number(v):
        try:
            return float(v)
        except (TypeError, ValueError):
            return None

    for got, (_, *values) in zip(out.collect(), data, strict=True):
        nums = [n for n in map(number, values) if n is not None]
        texts = [str(v) for v in values if v is not None]
        desc = sorted(nums, reverse=True)
        unique = sorted(set(nums), reverse=True)
        want = {
            "sum": float(sum(nums)),
            "average": statistics.mean(nums) if nums else None,
            "min": min(nums, default=None),
            "max": max(nums, default=None),
            "median": statistics.median(nums) if nums else None,
            "mode": min(statistics.multimode(nums)) if nums else None,
            "variance": statistics.variance(nums) if len(nums) > 1 else None,
            "standard_deviation": statistics.stdev(nums) if len(nums) > 1 else None,
            "k2": desc[1] if len(desc) > 1 else None,
            "k2u": unique[1] if len(unique) > 1 else None,
            "count": len(texts),
            "count_distinct": len(set(texts)),
            "any": texts[0] if texts else None,
        }
        for key, value in want.items():
            if isinstance(value, float):
                assert math.isclose(got[key], value), (key, got[key], value)
            else:
                assert got[key] == value, (key, got[key], value)


def test_condition_expressions(people):
    eu = [{"Condition": "IS", "Value": '["EU"]', "TargetColumn": "region"}]
    df = apply(
        people,
        step("UPPER_CASE", eu, sourceColumn="name"),
        step("ADD_SUFFIX", eu, sourceColumn="url", pattern="#eu", targetColumn="tagged"),
        step(
            "FILL_WITH_CUSTOM", [{"Condition": "IS_MISSING", "TargetColumn": "region"}], sourceColumn="score", value="0"
        ),
    ).orderBy("id")
    assert rows(df, "name", "tagged", "score") == [
        ("ADA LOVELACE", "https://ada.org/notes#eu", 120.0),
        ("grace hopper", None, 80.5),
        ("ALAN TURING", "#eu", None),  # the fill's condition (region missing) does not hold here
        ("Edsger Dijkstra", None, -42.0),
    ]
    # Lower-case keys, as some exports write them; two conditions are both required.
    lower = [
        {
            "action": {"operation": "UPPER_CASE", "parameters": {"sourceColumn": "name"}},
            "conditionExpressions": [
                {"condition": "GREATER_THAN", "value": "0", "targetColumn": "score"},
                {"condition": "IS_NOT", "value": '["EU"]', "targetColumn": "region"},
            ],
        }
    ]
    got = apply_recipe(people, lower, lambda ref: None).orderBy("id")
    assert rows(got, "name") == [("Ada Lovelace",), ("GRACE HOPPER",), ("Alan Turing",), ("Edsger Dijkstra",)]
    # A row-removing step removes only among the rows its conditions select.
    kept = apply(
        people,
        step(
            "REMOVE_MISSING", [{"Condition": "IS", "Value": '["EU"]', "TargetColumn": "region"}], sourceColumn="score"
        ),
    )
    assert sorted(r[0] for r in kept.select("id").collect()) == [1, 2, 4]
    doubled = people.union(people.where("id IN (2, 3)"))
    deduped = apply(doubled, step("DELETE_DUPLICATE_ROWS", eu))
    assert sorted(r[0] for r in deduped.select("id").collect()) == [1, 2, 2, 3, 4]  # region of 2 is not EU
    late = [{"Condition": "GREATER_THAN", "Value": "2", "TargetColumn": "id"}]
    filled = apply(people.coalesce(1), step("FILL_WITH_LAST_VALID", late, sourceColumn="score"))
    assert rows(filled.orderBy("id"), "score") == [(120.0,), (80.5,), (80.5,), (-42.0,)]
    # Refused where "some rows only" has no meaning, and where the step would drop data.
    with pytest.raises(RecipeError, match=r"step 1 \(RENAME\): ConditionExpressions are not supported"):
        apply(people, step("RENAME", eu, sourceColumn="name", targetColumn="n"))
    with pytest.raises(
        RecipeError, match=r"step 2 \(NEST_TO_ARRAY\): ConditionExpressions are not supported with these"
    ):
        apply(
            people,
            step("TRIM", sourceColumn="name"),
            step("NEST_TO_ARRAY", eu, sourceColumns=["name", "region"], targetColumn="a", removeSourceColumns="true"),
        )
    with pytest.raises(RecipeError, match=r"step 1: unknown operation 'NOT_AN_OPERATION'"):
        apply(people, step("NOT_AN_OPERATION", sourceColumn="name"))


def test_job_file_refuses_unsupported_conditions(tmp_path: Path):
    job = {
        "name": "cond-job",
        "type": "recipe",
        "input": {"path": "in.csv", "format": "csv"},
        "recipe": [step("SORT", [{"Condition": "IS", "Value": '["x"]', "TargetColumn": "a"}], expressions=["a"])],
        "outputs": [{"path": "out", "format": "parquet"}],
    }
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    with pytest.raises(JobError, match=r"step 1 \(SORT\): ConditionExpressions are not supported"):
        load_job_file(path)
