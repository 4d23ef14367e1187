"""docs/dlt.md as written: its five-minute walkthrough runs against a real ``mogateway serve`` and says
what the doc shows (the portal export the doc prints is the ``templates.csv`` the commands read), the
first scrubbed reply goes out with its template id and a reply matching no template is blocked as the
table says, ``simulate`` prints what the doc prints, and the examples of "Matching rules", "On the SMPP
bind", "The CSV import" and "Settings" are what the real matcher, settings loader and importer do.

The test changes only what it must: ``cl_abc`` (the placeholder for a client's id) becomes the id of a
client it registers first, the application's port 9000 a free one, and the gateway's URL, journal and
tokens are the test's, in the environment."""

from __future__ import annotations

import codecs
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import (
    ADMIN_TOKEN,
    GatewayClient,
    ServeProcess,
    clean_env,
    events,
    metric,
    mogateway_command,
    serve_env,
    start_serve,
)

from markdown_doc import MarkdownDoc, fenced_blocks
from mogateway.client import CallbackApp, InboundMessage
from mogateway.config import ConfigError, load_settings
from mogateway.config.settings import Settings
from mogateway.core.dlt import DEFAULT_VAR_MAX, DltIds, DltInvalid, TemplateSet, chain_hash, parse_template
from mogateway.core.dlt_csv import DltCsvError, decode_csv, read_dlt_csv
from mogateway.smpp.dlt import reply_tlvs
from mogateway.testing.callback_apps import serve_asgi
from mogateway.testing.recorder import Answer, CallbackRecorder

ROOT = Path(__file__).resolve().parents[2]
DOC = MarkdownDoc("docs/dlt.md")

#: A loaded 2-core machine may take far longer than the second these steps take when idle.
TIMEOUT = 30.0
PLACEHOLDER = "cl_abc"


def section(heading: str, level: str = "##") -> str:
    """The text of docs/dlt.md under ``heading`` (of ``level``), up to the next heading of that level."""
    return DOC.section(f"{level} {heading}")


blocks = fenced_blocks


def five_minutes() -> str:
    return section("Five minutes: from a portal export to the first scrubbed reply")


def doc_commands(block: str) -> list[str]:
    """The commands of a shell block, each without its comment (a ``\\`` continues a line)."""
    joined = block.replace("\\\n", " ")
    return [line.split("#", 1)[0].strip() for line in joined.splitlines() if line.startswith("mogateway")]


def doc_export() -> str:
    """The portal export the walkthrough's commands read as ``templates.csv``."""
    (export,) = blocks(five_minutes(), "csv")
    return export


def pe_id() -> str:
    """The PE id the walkthrough sets."""
    (found,) = set(re.findall(r"--pe-id (\d+)", five_minutes()))
    return found


def import_report() -> list[str]:
    """The text block of "The CSV import": the command, then what it prints."""
    (report,) = blocks(section("The CSV import", "###"), "text")
    return report.rstrip("\n").splitlines()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServeProcess]:
    """``mogateway serve`` with the test's journal and tokens, stopped by its pid at the end."""
    serve = start_serve(tmp_path, serve_env(tmp_path), timeout=60)
    try:
        yield serve
    finally:
        serve.stop()


def cli(workdir: Path, url: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """A doc command (``mogateway …``) as a reader runs it in ``workdir``, talking to the gateway at
    ``url`` with the admin token in the environment; a wide terminal, so no line of the tables wraps."""
    assert argv[0] == "mogateway", argv
    env = clean_env(MOGATEWAY_URL=url, MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN, COLUMNS="200")
    return subprocess.run(
        [*mogateway_command(), *argv[1:]],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=2 * TIMEOUT,
    )


def words(text: str) -> str:
    """``text`` with every run of whitespace and table rule characters made one space."""
    return " ".join(re.sub(r"[│┃┏┓┗┛┡┩└┘┌┐├┤┼━─╇╈╋┳┻╸╺╹╻]", " ", text).split())


# ------------------------------------------------------------------------------------ five minutes


def test_the_five_minutes_run_as_written(served: ServeProcess, tmp_path: Path) -> None:
    """The three steps of the walkthrough, command by command, on the doc's export: the PE id set with
    enforcement, the dry run changing nothing, the import reporting what "The CSV import" shows, the
    check naming the template the doc shows. Then the first scrubbed reply: a reply matching a template
    goes out with the PE id and the template id, one matching none is blocked (timeline and /metrics
    as the table says) and goes out when replayed after its template was added; without enforcement
    it goes out with the table's note."""
    pe = pe_id()
    (commands_block, _) = blocks(five_minutes(), "sh")
    commands = doc_commands(commands_block)
    assert [c.split()[2] for c in commands] == ["dlt-set", "dlt-import", "dlt-import", "dlt-check"]
    (tmp_path / "templates.csv").write_text(doc_export(), encoding="utf-8")
    gateway = GatewayClient(served.url, keep_alive=False)
    with CallbackRecorder.in_thread(Answer.text("Your balance is Rs 4520.")) as app:
        try:
            client = gateway.add_client(shortcodes=["56767"], callback_url=app.url)
            cid = str(client["id"])

            def run(command: str, code: int) -> str:
                assert PLACEHOLDER in command, command
                ran = cli(tmp_path, served.url, shlex.split(command.replace(PLACEHOLDER, cid)))
                assert ran.returncode == code, (command, ran.returncode, ran.stdout, ran.stderr)
                return ran.stdout

            # 1. The PE id, enforced.
            said = run(commands[0], 0)
            assert f"{cid}: PE id {pe}, 0 templates; replies matching none are blocked" in said, said
            # 2. What would change (nothing changes), then the import: it exits 1 as rows were refused.
            said = run(commands[1], 1)
            assert "would be added 11" in said and "refused 3" in said, said
            assert gateway.admin("GET", f"/v1/clients/{cid}").json()["dlt_templates"] == 0
            said = run(commands[2], 1)
            shown = import_report()
            assert shown[0].startswith("$ ") and doc_commands(shown[0][2:]) == [commands[2]]
            check_report(shown[1:], said)
            assert gateway.admin("GET", f"/v1/clients/{cid}").json()["dlt_templates"] == 11
            # 3. Which template the reply would match: as the doc shows it.
            said = run(commands[3], 0)
            (answer_block,) = blocks(five_minutes(), "text")[:1]
            asked, answer = answer_block.rstrip("\n").splitlines()
            assert asked == f"$ {commands[3]}"
            assert words(said) == words(answer)

            # The first scrubbed reply: the application's answer is the reply dlt-check matched.
            message = gateway.wait_state(gateway.push("56767", "BAL")["id"], timeout=TIMEOUT)
            assert message["state"] == "replied", message
            (submitted,) = events(message, "reply_submitted")
            template = re.search(r"matches template (\d{19})", answer)
            assert template is not None
            assert (submitted["dlt_template"], submitted["dlt_pe_id"]) == (template.group(1), pe)

            # A reply matching none, enforced: not sent, reply_blocked, why the closest three missed.
            app.answer = Answer.text("Your balance is Rs 4,520.")
            blocked_id = gateway.push("56767", "BAL")["id"]
            message = gateway.wait_state(blocked_id, timeout=TIMEOUT)
            assert message["state"] == "reply_blocked", message
            (blocked,) = events(message, "reply_blocked")
            assert blocked["reason"] == "no DLT template matches" and blocked["templates"] == 11
            assert len(blocked["closest"]) == 3
            assert blocked["closest"][0]["template_id"] == template.group(1)
            assert message["reply"] == "Your balance is Rs 4,520."
            assert events(message, "reply_submitted") == []

            # Without enforcement it goes out, with the table's note.
            run(f"mogateway clients dlt-set {PLACEHOLDER} --no-enforce", 0)
            message = gateway.wait_state(gateway.push("56767", "BAL")["id"], timeout=TIMEOUT)
            assert message["state"] == "replied", message
            (submitted,) = events(message, "reply_submitted")
            assert submitted["dlt"] == "no DLT template matches; sent without the client's DLT ids"

            # "register the missing template, replay, and the reply goes out"
            missing = '1107161234567890099 "Your balance is Rs {#var#}."'
            run(f"mogateway clients dlt-add {PLACEHOLDER} {missing}", 0)
            assert gateway.admin("POST", f"/v1/messages/{blocked_id}/replay").status_code == 202
            message = gateway.wait_state(blocked_id, frozenset({"replied"}), timeout=TIMEOUT)
            assert events(message, "reply_submitted")[-1]["dlt_template"] == "1107161234567890099"

            # /metrics counts every decision per client, as the doc's sample.
            exposition = gateway.admin("GET", "/metrics").text
            samples = re.findall(
                r'mogateway_dlt_replies_total\{client="cl_abc",result="(\w+)"\}',
                section("What the gateway does with each reply"),
            )
            assert samples == ["matched", "unmatched", "blocked"]
            counted = {
                r: metric(exposition, "mogateway_dlt_replies_total", client=cid, result=r) for r in samples
            }
            assert counted == {"matched": 2, "unmatched": 1, "blocked": 1}, counted
        finally:
            gateway.close()


def check_report(shown: list[str], said: str) -> None:
    """``dlt-import``'s report against the doc's: the summary lines as shown (up to the doc's "..."),
    and each refused row of the doc's table in the printed table, with its reason up to the doc's "…"."""
    printed = words(said)
    head, summary, _table_head, *rows = shown
    start, _, _ = head.partition(", ...")
    assert words(start) in printed, (start, said)
    assert words(summary) in printed, (summary, said)
    entity = [r for r in rows if r.startswith("entity ids")]
    refused = [r for r in rows if not r.startswith("entity ids")]
    for row in refused:
        line, template_id, reason = row.split(maxsplit=2)
        reason = reason.split("; ...", 1)[0]
        assert words(f"{line} {template_id} {reason}") in printed, (row, said)
    for row in entity:
        assert words(row) in printed, (row, said)


def test_simulate_prints_what_the_doc_shows(tmp_path: Path) -> None:
    """The doc's ``simulate`` command, against an application answering BAL as the doc's does, on the
    doc's export: it prints the doc's output (but for the milliseconds it took) and exits 9, as the
    reply would be blocked; ``--dlt-var-max``, which the doc names, is one of its options."""
    (_, simulate_block) = blocks(five_minutes(), "sh")
    (command,) = doc_commands(simulate_block)
    (_, shown) = blocks(five_minutes(), "text")
    assert "http://127.0.0.1:9000/" in command, "the doc's simulate command changed: adapt"
    (tmp_path / "templates.csv").write_text(doc_export(), encoding="utf-8")
    token = shlex.split(command)[shlex.split(command).index("--token") + 1]

    def bank(message: InboundMessage) -> str:
        return "Your balance is Rs 4,520." if message.message == "BAL" else "Send BAL"

    with serve_asgi(CallbackApp(bank, token)) as url:
        ran = cli(tmp_path, url, shlex.split(command.replace("http://127.0.0.1:9000/", url + "/")))
    assert ran.returncode == 9, (ran.stdout, ran.stderr)
    expected = shown.replace("http://127.0.0.1:9000/", url + "/").rstrip("\n").splitlines()
    printed = re.sub(r"\bin \d+ ms:", "in 3 ms:", ran.stdout).rstrip("\n").splitlines()
    assert printed == expected
    helped = cli(tmp_path, url, ["mogateway", "simulate", "--help"])
    assert "--dlt-var-max" in helped.stdout


# ------------------------------------------------------------------------------------ matching rules


def matching_rules() -> str:
    return section("Matching rules")


def test_a_variable_holds_1_to_30_characters_of_any_kind_and_the_rest_is_exact() -> None:
    """ "`{#var#}` stands for 1 to 30 characters of any kind (line breaks included)", the limit being the
    setting the doc names; everything else compared exactly (case, spaces, punctuation, line breaks)."""
    rules = " ".join(matching_rules().split())
    limit = re.search(r"\*\*1 to (\d+) characters\*\* of any kind \(line breaks included\)", rules)
    assert limit is not None and "the limit is the setting `dlt_var_max_chars`" in rules
    assert int(limit.group(1)) == DEFAULT_VAR_MAX == Settings.model_fields["dlt_var_max_chars"].default
    template = parse_template("1107161234567890001", "Your code: {#var#}!")
    assert template.match("Your code: " + "x" * DEFAULT_VAR_MAX + "!")
    assert not template.match("Your code: " + "x" * (DEFAULT_VAR_MAX + 1) + "!")
    assert not template.match("Your code: !")
    assert template.match("Your code: a, B\nc !")
    assert template.match("Your code: x!", var_max=1) and not template.match("Your code: xy!", var_max=1)
    for near in ("your code: 1!", "Your code:1!", "Your code; 1!", "Your code:\n1!", "Your code: 1"):
        assert not template.match(near), near


def test_the_typed_variables_hold_what_the_table_says() -> None:
    """Every variable of the doc's table is one the matcher knows (and no other exists), each holds the
    characters the table says and refuses the others, within the same length limit."""
    table = matching_rules().split("| variable | holds |", 1)[1].split("\n\n", 1)[0]
    holds: dict[str, str] = {}
    for row in table.splitlines()[2:]:
        names, what = row.strip().strip("|").split("|")
        for name in re.findall(r"`\{#(\w+)#\}`", names):
            holds[name] = what.strip()
    from mogateway.core.dlt import VARIABLE_KINDS

    assert set(holds) == set(VARIABLE_KINDS), holds
    # Per the table's words: a value each kind holds, and one it does not.
    examples = {
        "any characters": ("a b,\n!", None),
        "digits 0–9": ("4520", "4,520"),
        "letters (any script, with their vowel signs) and digits": ("अनिल42", "A-42"),
        "no spaces (whether a link is whitelisted is the operator's check)": (
            "https://x.in/a?b=1",
            "x.in /a",
        ),
        "digits, `+` and `-`": ("+91-98100", "98100 12"),
    }
    assert set(holds.values()) == set(examples), set(holds.values())
    for name, what in holds.items():
        good, bad = examples[what]
        template = parse_template("1107161234567890001", f"Ref {{#{name}#}} ok")
        assert template.match(f"Ref {good} ok"), (name, good)
        assert not template.match(f"Ref {'9' * (DEFAULT_VAR_MAX + 1)} ok"), name
        if bad is not None:
            assert not template.match(f"Ref {bad} ok"), (name, bad)


def test_a_template_gets_what_the_reply_gets() -> None:
    """With the client's newline unescaping on (the default), a literal ``\\n`` in a template is a line
    break, as in the application's answer; surrounding whitespace is removed from both."""
    rules = " ".join(matching_rules().split())
    assert "a literal `\\n` in a template is a line break" in rules
    templates = TemplateSet.compile(
        [("1107161234567890001", "  Your OTP is {#numeric#}.\\nValid 10 minutes. ")]
    )
    found = templates.match("Your OTP is 123456.\nValid 10 minutes.")
    assert found is not None and found.template_id == "1107161234567890001"
    kept = TemplateSet.compile([("1107161234567890001", "Line\\nnext {#var#}")], unescape_newlines=False)
    assert kept.match("Line\nnext 1") is None and kept.match("Line\\nnext 1") is not None


def test_the_most_specific_template_wins_as_in_the_example() -> None:
    """The doc's example (the winner given the larger id, so that the smallest id does not decide), and a
    template without variables over every template with some."""
    rules = " ".join(matching_rules().split())
    example = re.search(r"`([^`]+)` wins over `([^`]+)` for \"([^\"]+)\"", rules)
    assert example is not None, "the doc's example of the most specific template changed: adapt"
    winner, loser, reply = example.groups()
    templates = TemplateSet.compile([("1107161234567890002", winner), ("1107161234567890001", loser)])
    found = templates.match(reply)
    assert found is not None and found.template.text == winner
    assert "a template without variables wins over every template with some" in rules
    plain = TemplateSet.compile(
        [("1107161234567890009", reply), ("1107161234567890002", winner), ("1107161234567890001", loser)]
    )
    found = plain.match(reply)
    assert found is not None and found.template_id == "1107161234567890009"


def test_the_templates_the_doc_says_are_refused_are_refused() -> None:
    """Empty, longer than 2,000 characters, only variables, or a placeholder the doc lists as wrong."""
    rules = " ".join(matching_rules().split())
    paragraph = rules.split("A template is refused", 1)[1].split("no reply could ever match", 1)[0]
    assert "longer than 2,000 characters" in paragraph and "made only of variables" in paragraph
    wrong = re.findall(r"`([^`]+)`", paragraph.split("not one of the above", 1)[1])
    assert wrong == ["{#VAR#}", "{#var}", "{var}", "##var##", "{#otp#}"], wrong
    for placeholder in wrong:
        with pytest.raises(DltInvalid, match="is not a DLT variable") as refused:
            parse_template("1107161234567890001", f"Dear member {placeholder}, hello")
        assert refused.value.field == "text"
    for text in ("", "   ", "x" * 2001, "{#var#}", "{#var#} {#numeric#}"):
        with pytest.raises(DltInvalid):
            parse_template("1107161234567890001", text)
    assert parse_template("1107161234567890001", "x" * 2000).text == "x" * 2000


# ------------------------------------------------------------------------------------ the SMPP bind


def bind_example() -> str:
    """The doc's bind, with its ``# ...`` (the bind's other settings) filled with what a bind needs."""
    (block,) = blocks(section("On the SMPP bind"), "toml")
    assert "\n# ...\n" in block
    return block.replace("\n# ...\n", '\nhost = "smsc.airtel.example"\nsystem_id = "aggr01"\n')


def test_the_bind_example_is_what_the_loader_reads_and_what_a_matched_reply_carries(tmp_path: Path) -> None:
    """The doc's TOML through the real settings loader: its tags and telemarketer id; a matched reply's
    TLVs are the bind's ``reply_tlvs`` with the client's ids in place and the chain hash after them,
    SHA-256 of "<PE id>,<TM id>" as 64 lowercase hex characters; an unmatched reply's are the bind's."""
    config = tmp_path / "mogateway.toml"
    config.write_text(bind_example())
    (bind,) = load_settings(config).smpp.binds
    assert bind.dlt_tags() == (0x1400, 0x1401, 0x1402) and bind.dlt_tm_id == "1702158080400000123"
    base = bind.reply_tlv_list()
    assert [(t.tag, t.value) for t in base] == [
        (0x1400, b"1101234567890123456"),
        (0x1401, b"1107123456789012345"),
    ]
    pe_tag, template_tag, chain_tag = bind.dlt_tags()
    ids = DltIds(pe_id(), "1107161234567890001")
    carried = reply_tlvs(
        base, ids, pe_tag=pe_tag, template_tag=template_tag, chain_tag=chain_tag, tm_id=bind.dlt_tm_id
    )
    digest = chain_hash(ids.pe_id, "1702158080400000123")
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert [(t.tag, t.value) for t in carried] == [
        (0x1400, ids.pe_id.encode()),
        (0x1401, ids.template_id.encode()),
        (0x1402, digest.encode()),
    ]
    import hashlib

    assert digest == hashlib.sha256(f"{ids.pe_id},1702158080400000123".encode()).hexdigest()
    assert reply_tlvs(base, None, pe_tag=pe_tag, template_tag=template_tag) == base


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (("dlt_tm_id = ", "# dlt_tm_id = "), "dlt_tm_id"),
        (("dlt_chain_tlv = ", "# dlt_chain_tlv = "), "dlt_chain_tlv"),
        (('dlt_chain_tlv = "0x1402"', 'dlt_chain_tlv = "0x1401"'), "dlt_chain_tlv"),
        (('dlt_pe_tlv = "0x1400"', 'dlt_pe_tlv = "1400h"'), "dlt_pe_tlv"),
    ],
)
def test_a_wrong_dlt_setting_stops_the_gateway_naming_it(
    tmp_path: Path, change: tuple[str, str], named: str
) -> None:
    """ "`dlt_chain_tlv` without `dlt_tm_id` (or the reverse), two DLT settings on the same tag, or a
    malformed tag stop the gateway at start with one line naming the setting"."""
    config = tmp_path / "mogateway.toml"
    example = bind_example()
    assert example.count(change[0]) == 1
    config.write_text(example.replace(*change))
    with pytest.raises(ConfigError) as refused:
        load_settings(config)
    said = str(refused.value)
    assert named in said and "\n" not in said.strip(), said


# ------------------------------------------------------------------------------------ the CSV import


def csv_import() -> str:
    return " ".join(section("The CSV import", "###").split())


PE = "1201159178420181234"
ROW = "1107161234567890001,Your balance is Rs {#numeric#}."


def test_the_doc_export_is_what_the_importer_reads() -> None:
    """The walkthrough's ``templates.csv`` through the real importer (as the client with the doc's PE id
    would import it): the rows, columns, refusals and entity ids of the doc's report."""
    found = read_dlt_csv(decode_csv(doc_export().encode()), pe_id=pe_id(), unescape_newlines=True)
    _, head, summary, _, *rows = import_report()
    assert f"{found.rows} rows" in head and f"added {len(found.templates)}," in summary
    refused = [r for r in rows if not r.startswith("entity ids")]
    assert [(r.line, r.template_id) for r in found.refused] == [
        (int(row.split()[0]), row.split()[1]) for row in refused
    ]
    assert found.entity_ids == {pe_id()}


@pytest.mark.parametrize("kind", ["template_id", "text"])
def test_the_columns_the_doc_names_are_found(kind: str) -> None:
    """Every column name the doc gives for the id and the text, written as portals write them (any case,
    spaces, punctuation), under report title rows, with each delimiter the doc names."""
    names = {
        "template_id": re.search(r"the id \(([^)]*)\)", csv_import()),
        "text": re.search(r"the text \(([^)]*)\)", csv_import()),
    }[kind]
    assert names is not None, "the doc's column names changed: adapt"
    listed = re.findall(r"`([^`]+)`", names.group(1))
    assert len(listed) >= 4, listed
    delimiters = re.search(r"Commas, semicolons, tabs and `\|` are recognised", csv_import())
    assert delimiters is not None
    for name in listed:
        for delimiter in (",", ";", "\t", "|"):
            header = [name, "Template Content"] if kind == "template_id" else ["Template ID", name]
            rows = [
                "Content Template Report",
                "ACME Bank",
                delimiter.join(header),
                ROW.replace(",", delimiter),
            ]
            found = read_dlt_csv("\n".join(rows) + "\n")
            assert [t.template_id for _, t in found.templates] == ["1107161234567890001"], (name, delimiter)
            assert found.columns[kind] == name


def test_title_rows_above_the_header_are_skipped_as_the_doc_says() -> None:
    """The doc's number of title rows above the header is what the importer skips."""
    said = re.search(
        r"Title rows above the header are skipped \(the header must be one of the first (\d+) rows\)",
        csv_import(),
    )
    assert said is not None
    titles = [f"title {n}" for n in range(int(said.group(1)) - 1)]
    found = read_dlt_csv("\n".join([*titles, "Template ID,Template Content", ROW]) + "\n")
    assert len(found.templates) == 1
    with pytest.raises(DltCsvError):
        read_dlt_csv("\n".join([*titles, "one more", "Template ID,Template Content", ROW]) + "\n")


def test_the_encodings_the_doc_names() -> None:
    """UTF-8 with or without a BOM, UTF-16 with a BOM; anything else refused as a whole, saying to
    export it as CSV UTF-8."""
    text = "Template ID,Template Content\n1107161234567890001,आपका बैलेंस {#numeric#} है\n"
    for data in (text.encode(), codecs.BOM_UTF8 + text.encode(), text.encode("utf-16")):
        assert decode_csv(data) == text
    assert "export it as CSV UTF-8" in csv_import()
    for wrong in (
        "Template ID,Template Content\n1107161234567890001,Café {#var#}\n".encode("cp1252"),
        text.encode("utf-16-le"),
    ):
        with pytest.raises(DltCsvError, match="CSV UTF-8"):
            decode_csv(wrong)


def test_the_rows_the_doc_says_are_refused_are_refused_and_excel_ids_read() -> None:
    """Each refusal of the doc's list, with its line; the Excel ways of keeping an id as text read."""
    other = "1201159178420189999"
    rows = [
        "Template ID,Template Content,Status,Entity ID",
        f"1107161234567890001,Balance {{#numeric#}},Approved,{PE}",  # 2: imported
        f"110716123456789,Short id {{#var#}},Approved,{PE}",  # 3: not 19 digits
        f"1.10716E+18,Excel {{#var#}},Approved,{PE}",  # 4: a number Excel rounded
        f"'1107161234567890002,Quote {{#var#}},Active,{PE}",  # 5: imported
        f'"=""1107161234567890003""",Formula {{#var#}},approved,{PE}',  # 6: imported
        f"1107161234567890004,Pending {{#var#}},Pending,{PE}",  # 7: status
        f"1107161234567890005,Theirs {{#var#}},Approved,{other}",  # 8: another entity
        f"1107161234567890006,Bad {{#VAR#}},Approved,{PE}",  # 9: malformed
        f"1107161234567890001,Balance now {{#numeric#}},Approved,{PE}",  # 10: same id, other text
    ]
    found = read_dlt_csv("\n".join(rows) + "\n", pe_id=PE)
    assert [t.template_id for _, t in found.templates] == [
        "1107161234567890001",
        "1107161234567890002",
        "1107161234567890003",
    ]
    assert [r.line for r in found.refused] == [3, 4, 7, 8, 9, 10]
    assert found.entity_ids == {PE, other}
    doc = csv_import()
    for words_of_doc in ("an id that is not 19 digits", "1.10716E+18", "a status other than approved/active"):
        assert words_of_doc in doc
    assert "the same id twice with another text" in doc


# ------------------------------------------------------------------------------------ settings


def test_the_settings_table_gives_the_real_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each row of "Settings": the bind's defaults when the bind sets none, and the gateway's variable
    limit, read from the environment variable the table names."""
    table = section("Settings")
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \| ([^|]+) \|", table, flags=re.M)
    assert {name for name, _, _ in rows} == {
        "dlt_var_max_chars",
        "dlt_pe_tlv",
        "dlt_template_tlv",
        "dlt_chain_tlv",
        "dlt_tm_id",
        "reply_tlvs",
    }
    config = tmp_path / "mogateway.toml"
    config.write_text('[[smpp.binds]]\nname = "b"\nhost = "smsc.example"\nsystem_id = "aggr01"\n')
    (bind,) = load_settings(config).smpp.binds
    for name, where, default in rows:
        default = default.strip()
        if where.strip() == "`[[smpp.binds]]`":
            value = getattr(bind, name)
            assert (value or None) == (None if default == "none" else default.strip("`").strip('"')), name
        else:
            env = re.search(r"`(MOGATEWAY_\w+)`", where)
            assert env is not None and name == "dlt_var_max_chars"
            assert load_settings(config).dlt_var_max_chars == int(default.strip("`"))
            monkeypatch.setenv(env.group(1), "45")
            assert load_settings(config).dlt_var_max_chars == 45


def test_the_dlt_errors_the_doc_shows_are_the_shipped_table() -> None:
    """The receipt example's meaning is the shipped table's, and the codes the doc calls unverified are
    shown with ", unverified" (the others without)."""
    from mogateway.edges.dlt_errors import shipped_dlt_errors

    text = section("DLT errors coming back")
    example = re.search(r"err:(\d+) \((DLT [^\n]*)\)\n", text)
    assert example is not None
    table = shipped_dlt_errors()
    assert table.describe_receipt_error(example.group(1)) == example.group(2)
    unverified = re.search(r"the others\s+\(([^)]*)\)", text)
    assert unverified is not None
    codes: list[int] = []
    for part in re.findall(r"\d{3}(?:–\d{3})?", unverified.group(1)):
        first, _, last = part.partition("–")
        codes.extend(range(int(first), int(last or first) + 1))
    for code in codes:
        said = table.describe_receipt_error(str(code))
        assert said is not None and said.endswith(", unverified"), (code, said)
    for status in (0xC3, 0xC4):
        said = table.describe_status(status)
        assert said is not None and said.endswith(", unverified"), (status, said)
    assert not str(table.describe_receipt_error("630")).endswith(", unverified")
