"""Dialogue scripts (issue 53, item 2): the grammar (``omnivoice_rt.text.script``), speaking one
(``omnivoice_rt.dialogue``, the library's ``generate(script, speakers=...)``) on the tiny
fixture, the captions that name each speaker, and ``synthesize --script`` on the command line.
Each turn of a script is the same turn made alone with its speaker's voice; a designed voice
keeps its first turn's voice."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omnivoice_rt import captions, dialogue
from omnivoice_rt.limits import MAX_SCRIPT_CHARS, MAX_SPEAKERS
from omnivoice_rt.request import OptionError, Request
from omnivoice_rt.text import script
from omnivoice_rt.text.script import ScriptError, Turn

FAST = dict(num_step=4, seed=2, normalize_text=False)


@pytest.fixture(scope="module")
def voice(fp32_voice):
    """The session's fp32 model (conftest)."""
    return fp32_voice


# ----------------------------------------------------------------------------- the grammar


def test_named_lines_in_any_script_start_turns_and_plain_lines_continue_them():
    text = (
        "Before anyone speaks.\n"
        "María: Hola, ¿qué tal?\n"
        "小明：你好！\n"
        "Speaker 2: At 10:30 we go,\n"
        "  and this line carries on.\n"
        "\n"
        "Dr. Watson:Indeed.\n"
    )
    assert script.parse(text, named_lines=True) == [
        Turn(None, "Before anyone speaks.", 1),
        Turn("María", "Hola, ¿qué tal?", 2),
        Turn("小明", "你好！", 3),
        Turn("Speaker 2", "At 10:30 we go, and this line carries on.", 4),
        Turn("Dr. Watson", "Indeed.", 7),
    ]
    # not asked for: ordinary text, its colon read as written
    assert script.parse("Note: the gate closes at six.") == [
        Turn(None, "Note: the gate closes at six.", 1)
    ]


def test_voice_tags_are_always_a_script_and_keep_a_turns_own_markup():
    assert script.has_tags("Hi [voice:Ann] there") and not script.has_tags("[laughter] hi")
    assert script.parse("Hello. [VOICE:Ann] Hi! [pause:1s] Bye. [voice:Bob] Yo.") == [
        Turn(None, "Hello.", 1),
        Turn("Ann", "Hi! [pause:1s] Bye.", 1),
        Turn("Bob", "Yo.", 1),
    ]
    with pytest.raises(OptionError, match=r"\[voice:NAME\] tags.*dialogue script"):
        Request(text="Hello [voice:Ann] there.")


def read_turns(parts: list[Turn]) -> list[tuple[str | None, str]]:
    """``TurnReader``'s parts as ``parse``'s turns: (speaker, text, its spaces collapsed), each
    text part its turn's speaker's."""
    turns, speaker, said = [], None, ""
    for part in [*parts, Turn(None, "", 0)]:
        if part.text:
            assert part.speaker == speaker
            said += part.text
            continue
        if said.split():
            turns.append((speaker, " ".join(said.split())))
        speaker, said = part.speaker, ""
    return turns


@pytest.mark.parametrize("named_lines", [True, False])
def test_a_script_read_as_it_arrives_gives_the_turns_of_the_whole(named_lines):
    """``TurnReader`` (a Wyoming stream's chunks) cut at every place: its parts joined are
    ``parse``'s turns of the whole text, a name or a tag cut in two included."""
    text = (
        "Before.\nAnn: Hello there. How\n are you? [laughter] [voice:Bob] Fine [pause:1s] "
        "thanks.\r\n\nMaría：Hola.\rNote that: stays? [Voice: Ann ]no [voi\nce] [\n"
        f"[voice:{' ' * 90}Bob] a tag, however padded [voice:Ann and no end\n"
        "Zoë:\n  goes on.\x85Ann: next\u2028Bob: after\x0cfin\u2029Ann:\t\nstill Ann\r"
    )
    want = [(t.speaker, t.text) for t in script.parse(text, named_lines)]
    for size in range(1, 12):
        reader, parts = script.TurnReader(named_lines), []
        for at in range(0, len(text), size):
            parts += reader.feed(text[at : at + size])
        parts += reader.feed("", end=True)
        assert read_turns(parts) == want, size
    with pytest.raises(ScriptError, match=r"line 2: \[voice:a/b\] names no speaker"):
        script.TurnReader().feed("Hi.\nYo [voice:a/b] there")


PIECES = ["Ann:", "María：", " ", "\t", "\n", "\r", "\x85", "\u2028", "hi", "yo.", "[voice:Ann]",
          "[voice: Bob ]", "[voice:a/b]", "[", "]", ":", "\u3000", " " * 70, "[voice:", "../b:",
          "<b>x</b>："]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=14), st.lists(st.integers(1, 6), min_size=1))
@pytest.mark.parametrize("named_lines", [True, False])
def test_a_script_arriving_in_any_parts_reads_as_the_whole(named_lines, pieces, cuts):
    """Texts made of names, tags, line breaks of every kind and long blanks, cut anywhere:
    ``TurnReader`` gives ``parse``'s turns, or refuses with ``parse``'s message."""
    text = "".join(pieces)
    try:
        want = [(t.speaker, t.text) for t in script.parse(text, named_lines)]
    except ScriptError as exc:
        want = str(exc)
    reader, parts, at = script.TurnReader(named_lines), [], 0
    try:
        for size in cuts * (len(text) + 1):
            if at >= len(text):
                break
            parts, at = parts + reader.feed(text[at : at + size]), at + size
        parts += reader.feed("", end=True)
    except ScriptError as exc:
        assert str(exc) == want
        return
    turns = read_turns(parts)
    assert turns == want or (not turns and "nothing to say" in want)


@pytest.mark.parametrize(
    "text", ["Ann:\n\nBob: hi", "Ann:\nBob: hi", "Hi.\r\nAnn: \r\n", "Hi\u2028Ann:\u3000\u2028 \nx"]
)
def test_a_named_line_with_no_text_is_refused_read_whole_or_as_it_arrives(text):
    """A "Name:" line with no text and no line carrying its turn on: ``parse`` and
    ``TurnReader``, cut at every place, refuse it naming the same line."""
    refused_alike(text, "has no text")


@pytest.mark.parametrize(
    "text",
    ["[voice:Bob][voice:Ann] there", "Hi [voice:Bob]", "[voice:Bob]\n\n[voice:Ann] hi",
     "Hi.\n[voice:Bob] \nAnn: hi"],
)  # fmt: skip
def test_a_voice_tag_with_no_text_is_refused_read_whole_or_as_it_arrives(text):
    """A ``[voice:NAME]`` tag with nothing said before the next speaker or the end, as a
    "Name:" line with no text: ``parse`` and ``TurnReader``, cut at every place, refuse it
    naming the tag's line (it was dropped without a word)."""
    refused_alike(text, r"\[voice:Bob\] has no text")


def refused_alike(text: str, match: str) -> None:
    """``parse`` refuses ``text`` (named lines read), and ``TurnReader``, fed it cut at every
    place, with the same message."""
    with pytest.raises(ScriptError, match=match) as whole:
        script.parse(text, named_lines=True)
    for size in range(1, len(text) + 1):
        reader = script.TurnReader(named_lines=True)
        with pytest.raises(ScriptError) as read:
            for at in range(0, len(text), size):
                reader.feed(text[at : at + size])
            reader.feed("", end=True)
        assert str(read.value) == str(whole.value), size


def test_ssml_voice_elements_are_turns_each_a_document_of_its_own():
    """SSML's ``<voice name>``: a turn each, the elements around it reopened in its document,
    read as SSML by the turn's request; the text outside every ``<voice>`` the default's."""
    from omnivoice_rt.text import markup
    from omnivoice_rt.text.markup import Segment, Silence

    doc = (
        '<speak xml:lang="en"><p>Welcome.\n<voice name="Ann">Hello <break time="1s"/> you.'
        '</voice>\n<voice name="María"><prosody rate="slow">Hola, <sub alias="Doctor">Dr.</sub>'
        ' &amp; co.</prosody></voice></p>\nAnn: stays text.<voice name="Ann"> </voice></speak>'
    )
    assert script.has_tags(doc) and not script.has_tags("<speak>Ann: hi [voice]</speak>")
    assert not script.has_tags('<speak><!-- <voice name="x"> -->hi</speak>')  # a comment's
    turns = script.parse(doc, named_lines=True)
    assert [(t.speaker, t.line) for t in turns] == [(None, 1), ("Ann", 2), ("María", 3), (None, 4)]
    assert turns[1].text == (
        '<speak xml:lang="en"><p>Hello <break time="1s"></break> you.</p></speak>'
    )
    assert markup.parse(turns[1].text) == [
        Segment("Hello", "en"),
        Silence(1.0),
        Segment("you.", "en"),
    ]
    assert [p.text for p in markup.parse(turns[2].text)] == ["Hola,", "Doctor", "& co."]
    assert {p.rate for p in markup.parse(turns[2].text)} == {0.75}  # the <prosody> around it
    assert markup.parse(turns[3].text) == [Segment("Ann: stays text.", "en")]
    with pytest.raises(OptionError, match="SSML <voice name> elements"):
        Request(text=doc)


@pytest.mark.parametrize(
    "text, words",
    [
        ('<speak><voice name="../x">Hi.</voice></speak>', "line 1: <voice> takes a speaker"),
        ('<speak><voice gender="f" name="A">Hi.</voice></speak>', "takes a speaker's name alone"),
        ('<speak>\n<voice name="A">Hi.</speak>', "not well formed at line 2"),
        ('<speak><voice name="A">[voice:B] Hi.</voice></speak>', r"\[voice:B\] inside SSML"),
        ('<speak><voice name="A">[voice&#58;B] Hi.</voice></speak>', r"\[voice:B\] inside SSML"),
        (f"<speak>[voice&#58;{'&#32;' * 200}B] Hi.</speak>", r"\[voice: +inside SSML"),
        ('<!DOCTYPE x [<!ENTITY a "b">]><speak><voice name="A">&a;</voice></speak>', "DOCTYPE"),
        ('<speak><voice name="A"> <break time="1s"/> </voice></speak>', "nothing to say"),
        ('<?xml version="1.0"?><p><voice name="A">Hi.</voice></p>', "must start with <speak>"),
        ('<!-- x --><voice name="A">a &lt; b</voice>', "must start with <speak>, not <voice>"),
        ('<speak><sub alias="W W W"><voice name="B">WWW</voice></sub></speak>', "inside <sub>"),
        (  # one long attribute around many voices: the turns would repeat it each
            f"<speak><prosody rate='{'1' * 4_000}'>"
            + '<voice name="A">a</voice>' * 100
            + "</prosody></speak>",
            "repeat the elements around their <voice> too often",
        ),
        (
            "<speak>" + "".join(f'<voice name="S{n}">hi.</voice>' for n in range(17)) + "</speak>",
            "'S16' is speaker 17",
        ),
    ],
)
def test_an_ssml_script_that_cannot_be_spoken_names_the_line_and_the_fix(text, words):
    with pytest.raises(ScriptError, match=words):
        script.parse(text)


@pytest.mark.parametrize(
    "text, words",
    [
        ("Ann: Hi.\nBob:\n\nAnn: Bye.", "line 2: 'Bob' has no text; write 'Bob: what Bob says'"),
        ("Ann: Hi.\nBob:", "line 2: 'Bob' has no text"),
        ("Hi [voice:../../etc/passwd] there", r"line 1: \[voice:../../etc/passwd\] names no"),
        ("Hi [voice:<b>x</b>] there", "names no speaker"),
        ("Hi [voice:] there", "names no speaker"),
        ("Ann: hi\n../etc/passwd: hello", "line 2: '../etc/passwd' is no speaker's name; a name"),
        ("<b>Bob</b>: hello", "line 1: '<b>Bob</b>' is no speaker's name"),
        ("Ann: hi\n<v Bob>: hello", "line 2: '<v Bob>' is no speaker's name"),
        ("Ann: hi\n~/notes: hello", "line 2: '~/notes' is no speaker's name"),
        ("\n  \n", "nothing to say"),
        (
            "".join(f"S{n}: hi.\n" for n in range(MAX_SPEAKERS + 1)),
            f"line {MAX_SPEAKERS + 1}: 'S{MAX_SPEAKERS}' is speaker {MAX_SPEAKERS + 1}",
        ),
        ("Ann: " + "a" * MAX_SCRIPT_CHARS, "the limit is 100,000"),
    ],
)
def test_a_script_that_cannot_be_spoken_names_the_line_and_the_fix(text, words):
    with pytest.raises(ScriptError, match=words):
        script.parse(text, named_lines=True)


@pytest.mark.parametrize("line", ["and/or: both", "24/7: open", "N/A: none", "<3 you: she wrote"])
def test_a_line_whose_prefix_is_no_name_nor_a_path_nor_markup_is_text(line):
    assert script.parse(f"Ann: hi\n{line}", named_lines=True) == [Turn("Ann", f"hi {line}", 1)]


def test_captions_name_the_speaker_in_every_format():
    said = [
        captions.Caption(0, 24000, 24000, "Hi <there> & you.", speaker="María"),
        captions.Caption(30000, 48000, 24000, "Yes.", speaker=None),
    ]
    vtt = captions.write(said, "vtt")
    assert "<v María>Hi &lt;there&gt; &amp; you.\n" in vtt and "\nYes.\n" in vtt
    webvtt = pytest.importorskip("webvtt", reason="webvtt-py (dev extra)")
    import html
    import io

    read = webvtt.from_buffer(io.StringIO(vtt))  # webvtt-py leaves the entities as they are
    assert read.captions[0].voice == "María"
    assert html.unescape(read.captions[0].text) == "Hi <there> & you."
    assert "María: Hi <there> & you." in captions.write(said, "srt")
    entries = json.loads(captions.write(said, "json"))
    assert entries[0]["speaker"] == "María" and "speaker" not in entries[1]
    assert captions.from_json(entries) == said


# ----------------------------------------------------------------------------- speaking


def test_each_turn_is_its_speaker_alone_and_a_design_keeps_its_first_voice(voice):
    speakers = {"Ann": {"instruct": "female, high pitch"}, "Bob": {"instruct": "male"}}
    text = "Ann: Hello there.\nBob: Hi, Ann.\nAnn: How are you?"
    speech = voice.generate(text, script=True, speakers=speakers, turn_pause=0.25, **FAST)
    assert speech.metadata["turns"] == 3 and speech.metadata["speakers"] == ["Ann", "Bob"]
    assert [c.speaker for c in speech.captions] == ["Ann", "Bob", "Ann"]
    ann = voice.generate("Hello there.", instruct="female, high pitch", **FAST)
    bob = voice.generate("Hi, Ann.", instruct="male", **FAST)
    again = voice.generate(
        "How are you?", instruct="female, high pitch", voice_prompt=ann.voice_prompt(), **FAST
    )
    gap = np.zeros(round(0.25 * voice.sample_rate), np.float32)
    expected = np.concatenate([ann.waveform, gap, bob.waveform, gap, again.waveform])
    np.testing.assert_array_equal(speech.waveform, expected)
    starts = [c.start_sample for c in speech.captions]
    assert starts[1] == ann.waveform.size + gap.size + bob.captions[0].start_sample
    # at another rate: the track resampled once, the captions at the same seconds
    at_16k = voice.generate(
        text, script=True, speakers=speakers, turn_pause=0.25, sample_rate=16000, **FAST
    )
    assert at_16k.sample_rate == 16000
    assert abs(at_16k.seconds - speech.seconds) < 1 / 16000 + 1e-9
    assert abs(at_16k.captions[2].start - speech.captions[2].start) <= 1 / 16000


def test_one_speakers_reference_leaves_every_other_voice_alone(voice, tmp_path):
    """Ann clones a reference, Bob is designed: in either order each turn is its speaker's
    alone, Bob's as if Ann's reference had never been encoded (nothing of it in his prompt)."""
    import soundfile as sf

    reference, said = tmp_path / "ann.wav", "Hello in my voice."
    t = np.arange(48000) / 24000
    sf.write(reference, (0.2 * np.sin(2 * np.pi * 180 * t) * (1 + np.sin(7 * t))) / 2, 24000)
    speakers = {"Ann": {"ref_audio": str(reference), "ref_text": said}, "Bob": {"instruct": "male"}}
    ann = voice.generate("Hello there.", ref_audio=str(reference), ref_text=said, **FAST)
    bob = voice.generate("Hi, Ann.", instruct="male", **FAST)
    gap = np.zeros(round(0.25 * voice.sample_rate), np.float32)
    for text, turns in (("Ann: Hello there.\nBob: Hi, Ann.", (ann, bob)),
                        ("Bob: Hi, Ann.\nAnn: Hello there.", (bob, ann))):  # fmt: skip
        speech = voice.generate(text, script=True, speakers=speakers, turn_pause=0.25, **FAST)
        expected = np.concatenate([turns[0].waveform, gap, turns[1].waveform])
        np.testing.assert_array_equal(speech.waveform, expected)


def test_an_unknown_speaker_or_a_bad_turn_is_refused_before_anything_runs(voice):
    made = []
    with pytest.raises(ScriptError, match="line 2: no voice for speaker 'Bob'; the voices are Ann"):
        voice.generate(
            "Ann: Hi.\nBob: Hello.",
            script=True,
            speakers={"Ann": {"instruct": "female"}},
            progress=lambda done, total: made.append(done),
            **FAST,
        )
    with pytest.raises(OptionError, match="line 2: .*speed"):
        voice.generate(
            "Ann: Hi.\nBob: Hello.",
            script=True,
            speakers={"Ann": {}, "Bob": {"speed": 99.0}},
            progress=lambda done, total: made.append(done),
            **FAST,
        )
    assert made == []


@pytest.mark.parametrize(
    "changed, words",
    [
        ({"turn_pause": None}, "turn_pause must be 0 to 5 seconds"),
        ({"turn_pause": float("nan")}, "turn_pause must be 0 to 5 seconds"),
        ({"turn_pause": 10**400}, "turn_pause must be 0 to 5 seconds"),
        ({"sample_rate": 5}, "sample_rate must be a whole number from 8000 to 48000"),
        ({"duration": 3.0}, "leave duration out"),
        ({"speakers": {"Ann": {"speed": 99.0}}}, "line 1: speed must be"),
    ],
)
def test_options_a_script_cannot_take_are_refused_naming_them(changed, words):
    arguments = {"speakers": {"Ann": {}}, **changed}
    options = {k: arguments.pop(k) for k in ("sample_rate", "duration") if k in arguments}
    with pytest.raises(OptionError, match=words) as caught:
        dialogue.prepare("Ann: Hi.", options, named_lines=True, **arguments)
    assert caught.value.option in ("turn_pause", "sample_rate", "duration", "speed")


def test_a_speakers_own_rate_is_the_tracks_and_unused_voices_are_not_read(voice):
    speakers = {
        "Ann": {"instruct": "female", "sample_rate": 8000},  # the track's rate wins
        "Zed": {"voice_prompt": "/nonexistent/zed.npz"},  # never read: Zed does not speak
    }
    made = dialogue.prepare("Ann: Hi there.", FAST, speakers, named_lines=True)
    assert "Zed" not in made.voices and made.voices["Ann"].get("sample_rate") is None
    speech = dialogue.speak(voice, made)
    alone = voice.generate("Hi there.", instruct="female", **FAST)
    np.testing.assert_array_equal(speech.waveform, alone.waveform)


def test_library_speakers_take_voices_by_name_and_designs(tmp_path):
    from omnivoice_rt.voices import VoiceLibrary

    library = VoiceLibrary(tmp_path, writable=True)
    library.add_design("narrator", "male, low pitch")
    table = dialogue.library_speakers(library, {"María": "narrator", "Bob": "female, whisper"})
    assert table["narrator"] == table["María"] == library.options("narrator")
    assert table["Bob"] == {"instruct": "female, whisper"} and "alloy" in table
    with pytest.raises(ScriptError, match="speaker 'Bob': 'purple' is neither a voice"):
        dialogue.library_speakers(library, {"Bob": "purple"})
    with pytest.raises(ScriptError, match="is no speaker's name"):
        dialogue.library_speakers(library, {"../x": "narrator"})


def test_given_voices_read_the_command_line_and_the_pages_table_alike():
    lines = ["María = narrator", "", "Bob=female, whisper", "Ann="]
    assert dialogue.given_voices(lines, "speakers, line") == {
        "María": "narrator",
        "Bob": "female, whisper",
    }  # "Ann=": the library's voice of that name; "Bob=...=": the first "=" splits
    with pytest.raises(ScriptError, match=r"--speaker 2 \('Bob'\): write NAME=VOICE"):
        dialogue.given_voices(["Ann=x", "Bob"], "--speaker")
    with pytest.raises(ScriptError, match="--speaker 1"):
        dialogue.given_voices(["=female"], "--speaker")
    assert dialogue.given_voices(["Bob", "Ann=x"], "speakers, line", strict=False) == {"Ann": "x"}
    with pytest.raises(
        ScriptError, match=r"--speaker 2: 'Ann' is given two voices \('x' and 'y'\)"
    ):
        dialogue.given_voices(["Ann=x", "Ann=y"], "--speaker")
    assert dialogue.given_voices(["Ann=x", "Ann = x", "Ann="], "--speaker") == {"Ann": "x"}


def test_the_command_line_speaks_a_script_with_its_speakers(fp32_artifacts, tmp_path):
    import soundfile as sf

    from tests.runtime.test_runtime import ROOT

    source = tmp_path / "talk.txt"
    source.write_text("María: Hola.\nBob：Hello there.\n", encoding="utf-8")
    model = ["--model-dir", str(fp32_artifacts), "--precision", "fp32", "--num-step", "4"]

    def cli(*args):
        command = [sys.executable, "-m", "omnivoice_rt", "synthesize", *model, *args]
        return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)

    out, vtt = tmp_path / "talk.wav", tmp_path / "talk.vtt"
    done = cli(
        "--script", str(source), "--speaker", "María=female", "--speaker", "Bob=male",
        "--output", str(out), "--captions", str(vtt), "--seed", "1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sf.info(out).duration > 0.5
    written = vtt.read_text(encoding="utf-8")
    assert "<v María>Hola." in written and "<v Bob>Hello there." in written
    refused = cli("--script", str(source), "--speaker", "María=female", "--output", str(out))
    assert refused.returncode != 0 and "line 2: no voice for speaker 'Bob'" in refused.stderr
    assert "Traceback" not in refused.stderr
    both = cli("--script", str(source), "--text", "Hi.", "--output", str(out))
    assert both.returncode != 0 and "--text TEXT or --script FILE, not both" in both.stderr
    # --text with [voice:NAME] tags is a script too, its "Name:" lines text (no --script)
    tagged = cli(
        "--text", "Note: hi. [voice:Bob] Hello there.", "--speaker", "Bob=male",
        "--output", str(out), "--captions", str(vtt), "--seed", "1",
    )  # fmt: skip
    assert tagged.returncode == 0, tagged.stderr
    written = vtt.read_text(encoding="utf-8")
    assert "\nNote: hi.\n" in written and "<v Bob>Hello there." in written


def test_the_command_line_refuses_a_file_it_cannot_write_before_any_work(tmp_path):
    """An output, captions or word-captions file in a folder that does not exist, or naming a
    folder, is one line before the model loads (the model folder here does not exist: had the
    command gone on to load it, its error would be another); so are align's missing audio and
    empty text."""
    from tests.runtime.test_runtime import ROOT

    def cli(*args):
        command = [sys.executable, "-m", "omnivoice_rt", *args]
        return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)

    nowhere = tmp_path / "missing" / "out"
    missing = f"{nowhere.parent} does not exist; create it or write elsewhere"
    model = ["synthesize", "--model-dir", str(tmp_path / "no-model"), "--text", "Hi."]
    out = ["--output", str(tmp_path / "a.wav")]
    film = tmp_path / "film.srt"  # dub: --output named, not the captions beside it
    film.write_text("1\n00:00:00,000 --> 00:00:01,000\nHi.\n", encoding="utf-8")
    cases = [
        ([*model, "--output", f"{nowhere}.wav"], f"--output {nowhere}.wav: the folder {missing}"),
        ([*model, "--output", f"{nowhere}.mp3"], f"--output {nowhere}.mp3: the folder {missing}"),
        ([*model, "--output", str(tmp_path)], f"--output {tmp_path} is a folder"),
        ([*model, *out, "--captions", f"{nowhere}.srt"], f"--captions {nowhere}.srt: the folder"),
        ([*model, *out, "--word-captions", f"{nowhere}.vtt"], "--word-captions"),
        (
            ["dub", "--subtitles", str(film), "--output", f"{nowhere}.wav"],
            f"--output {nowhere}.wav",
        ),
        (["align", "--audio", str(tmp_path / "none.wav"), "--text", "Hi."], "no such file"),
        (["align", "--audio", str(tmp_path / "none.wav"), "--text", " ... "], "no words to place"),
    ]
    for args, words in cases:
        done = cli(*args)
        assert done.returncode != 0 and words in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr


def test_a_speaker_is_the_voice_of_its_name_in_any_case_where_one_voice_has_it():
    """A script's "Alloy:" speaks in the library's alloy (built-in names are any case), on
    every door that prepares a script and on Wyoming's streams (``library_voice``); where two
    voices differ only in case, only the exact name is either."""
    from omnivoice_rt import dialogue
    from omnivoice_rt.voices import VoiceLibrary

    library = VoiceLibrary(None)
    made = dialogue.prepare(
        "Alloy: Hi.\nECHO: Hello.", {}, dialogue.library_speakers(library), named_lines=True
    )
    assert made.voices["Alloy"]["instruct"] == library.options("alloy")["instruct"]
    assert made.voices["ECHO"]["instruct"] == library.options("echo")["instruct"]
    assert dialogue.library_voice(library, "ALLOY") == library.options("alloy")
    with pytest.raises(ValueError, match="Unknown voice 'Zed'"):
        dialogue.library_voice(library, "Zed")
    twins = {"Ann": {"instruct": "female"}, "ann": {"instruct": "male"}}
    assert dialogue.speaker_key(twins, "ann") == "ann"
    with pytest.raises(ScriptError, match="line 1: no voice for speaker 'ANN'"):
        dialogue.prepare("ANN: Hi.", {}, twins, named_lines=True)


def test_a_doors_speakers_table_is_read_as_the_command_lines():
    """The OpenAI body's and a Wyoming event's ``speakers`` (``checked_speakers``): "Ann": ""
    is the library's Ann, as "Ann=" is on the command line; one name given twice (after its
    spaces) is refused; a name given a voice is that voice in any case, over the library's of
    that name ("Echo" given: "ECHO:" speaks it, not the built-in echo)."""
    from omnivoice_rt import dialogue
    from omnivoice_rt.voices import VoiceLibrary

    assert dialogue.checked_speakers({"alloy": "", " María ": "echo"}) == {"María": "echo"}
    with pytest.raises(ScriptError, match="'Ann' is given two voices"):
        dialogue.checked_speakers({"Ann": "female", "Ann ": "male"})
    with pytest.raises(ScriptError, match="'A=B' in 'speakers' is no speaker's name"):
        dialogue.checked_speakers({"A=B": "female"})
    library = VoiceLibrary(None)
    table = dialogue.library_speakers(library, {"Echo": "female, low pitch"})
    made = dialogue.prepare("ECHO: Hi.\nalloy: Yo.", {}, table, named_lines=True)
    assert made.voices["ECHO"]["instruct"] == "female, low pitch"
    assert made.voices["alloy"]["instruct"] == library.options("alloy")["instruct"]


def test_the_command_line_notes_a_speaker_the_script_never_names(tmp_path):
    """``--speaker Ghost=male`` for a script with no Ghost (a typo in either, most likely) is a
    note on stderr before the model loads (the model folder here does not exist)."""
    from tests.runtime.test_runtime import ROOT

    source = tmp_path / "talk.txt"
    source.write_text("Ann: Hi.\n", encoding="utf-8")
    command = [sys.executable, "-m", "omnivoice_rt", "synthesize", "--script", str(source),
               "--speaker", "ann=female", "--speaker", "Ghost=male",
               "--model-dir", str(tmp_path / "none"), "--output", str(tmp_path / "a.wav")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "note: --speaker Ghost: the script has no speaker 'Ghost'" in done.stderr
    assert "--speaker ann" not in done.stderr  # Ann, in any case
