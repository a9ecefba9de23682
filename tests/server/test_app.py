"""The Space as a real server on 127.0.0.1, called through ``gradio_client``."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from gradio_client import Client, handle_file

from omnivoice_build.equivalence import write_reference
from omnivoice_rt.server.page import LICENCE_LINE
from tests.conftest import FIXED, TRANSCRIPT, running_app


@pytest.fixture(scope="module")
def client(app_server):
    return Client(app_server, verbose=False)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return write_reference(str(tmp_path_factory.mktemp("app-ref") / "reference.wav"))


def read(path) -> tuple[np.ndarray, int]:
    audio, rate = sf.read(path)
    return audio, rate


def test_api_lists_the_stable_endpoints_only(client):
    endpoints = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert {"/synthesize", "/clone", "/save_voice_prompt", "/list_voices"} <= endpoints
    assert not [e for e in endpoints if e.startswith("/lambda") or "describe" in e or "design" in e]
    info = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    for endpoint in ("/synthesize", "/clone"):
        preset = next(p for p in info[endpoint]["parameters"] if p["parameter_name"] == "preset")
        # the page's and the API's default on a CPU
        assert preset["parameter_default"] == "balanced"
        # the server's default precision, as the handlers were made for this server
        precision = next(
            p for p in info[endpoint]["parameters"] if p["parameter_name"] == "precision"
        )
        assert precision["parameter_default"] == "int4"
        assert preset["python_type"]["type"] == "Literal['best', 'balanced', 'fast', 'turbo']"
        parameters = info[endpoint]["parameters"]
        normalize = next(p for p in parameters if p["parameter_name"] == "normalize_text")
        # appended after the older arguments, so calls by position keep working
        assert normalize["parameter_default"] is True
        names = [p["parameter_name"] for p in parameters]
        later = ["instruct", "voice"] if endpoint == "/clone" else []
        aliases = ["guidance", "postprocess"]  # the older names, still taken
        assert names[names.index("preset") :] == [
            "preset", "normalize_text", *later, *aliases, "sample_rate", "words"
        ]  # fmt: skip
        assert {"guidance_scale", "postprocess_output"} <= set(names)  # as OPTIONS names them


def test_the_api_takes_the_options_names_and_the_older_ones(client):
    def audio(**settings):
        kwargs = {**FIXED, **settings}
        path, _, _ = client.predict(
            "Hello.", "English", "", "int4", **kwargs, api_name="/synthesize"
        )
        return sf.read(path)[0]

    new = audio(guidance_scale=0.5, postprocess_output=True)
    old = audio(guidance=0.5, postprocess=True)
    np.testing.assert_array_equal(new, old)
    assert not np.array_equal(new, audio(guidance_scale=2.0, postprocess_output=True))


def test_the_page_says_under_which_licences_the_code_and_the_weights_are(app_server):
    import urllib.request

    config = json.loads(urllib.request.urlopen(f"{app_server}/config", timeout=30).read())
    footers = [
        c["props"].get("value")
        for c in config["components"]
        if c["props"].get("elem_id") == "licence"
    ]
    assert footers == [LICENCE_LINE]
    assert "CC-BY-NC" in LICENCE_LINE and "Apache-2.0" in LICENCE_LINE


def test_synthesize_auto_voice_and_voice_design(client):
    for instruct in ("", "female, low pitch, british accent"):
        path, info, _ = client.predict(
            "Hello from the API.", "English", instruct, "int4", **FIXED, api_name="/synthesize"
        )
        audio, rate = read(path)
        assert rate == 24000
        assert audio.shape[0] == 2 * 24000 + 2 * 2400  # 2 s and 0.1 s of padding each side
        assert "2.20 s of audio" in info and "int4" in info and "seed 3" in info


def test_the_api_answers_at_the_sample_rate_asked(client):
    path, _, captions = client.predict(
        "Hello from the API.",
        "English",
        "",
        "int4",
        **FIXED,
        sample_rate=16000,
        api_name="/synthesize",
    )
    audio, rate = read(path)
    assert rate == 16000
    assert audio.shape[0] == (2 * 24000 + 2 * 2400) * 2 // 3  # the same 2.2 s
    with pytest.raises(Exception, match="sample_rate|8000"):
        client.predict("Hi.", "English", "", "int4", sample_rate=7000, api_name="/synthesize")


def test_the_api_places_each_word_when_asked_in_the_captions_it_returns(client):
    """words=True: the third output is WebVTT, each cue's words after their starts' timestamp
    tags (read back by webvtt-py), the words those of the text as written."""
    import io

    import webvtt

    from omnivoice_rt.align import words_of

    text = "Hello from the API. [pause:0.5s] And goodbye."
    path, info, captions = client.predict(
        text, "English", "", "int4", **FIXED, words=True, api_name="/synthesize"
    )
    assert captions.endswith(".vtt") and "s of audio" in info
    cues = list(webvtt.from_buffer(io.StringIO(open(captions, encoding="utf-8").read())))
    assert len(cues) == 2
    said = [re.sub(r"<[^>]+>", "", cue.raw_text).split() for cue in cues]
    assert said == [words_of("Hello from the API."), words_of("And goodbye.")]
    found = re.findall(r"<(\d\d):(\d\d):([\d.]+)>", cues[0].raw_text)
    stamps = [int(h) * 3600 + int(m) * 60 + float(s) for h, m, s in found]
    assert stamps == sorted(stamps) and cues[0].start_in_seconds <= stamps[0] + 1e-3
    with pytest.raises(Exception, match="words must be true or false"):
        client.predict("Hi.", "English", "", "int4", words="yes", api_name="/synthesize")


def test_the_api_returns_the_runtime_waveform_at_its_loudness(client, cpu_artifacts):
    """The wav is the runtime's result to 16-bit rounding, at the loudness it set (peak 0.5 without
    a reference): not rescaled to full scale as Gradio does with float audio."""
    from omnivoice_rt.model import PRESETS, OmniVoiceONNX

    path, _, _ = client.predict(
        "Loudness kept.", "English", "", "int4", **FIXED, api_name="/synthesize"
    )
    audio, _ = read(path)
    # the API's default preset
    cache = {k: v for k, v in PRESETS["balanced"].items() if k != "num_step"}
    expected = (
        OmniVoiceONNX.load(cpu_artifacts, "int4")
        .generate(
            "Loudness kept.",
            language="English",
            seed=3,
            num_step=8,
            guidance_scale=2.0,
            duration=2.0,
            postprocess_output=False,
            **cache,
        )
        .waveform
    )
    assert np.abs(audio).max() == pytest.approx(0.5, abs=1e-3)
    np.testing.assert_allclose(audio, expected, atol=1e-4)


def test_the_api_returns_the_captions_of_the_runtimes_result(client, cpu_artifacts):
    """The third output: an SRT file, read back by the ``srt`` library, whose cues are
    ``generate``'s captions of the same request (to the millisecond), a pause between them."""
    srt = pytest.importorskip("srt")
    from omnivoice_rt.model import PRESETS, OmniVoiceONNX

    text = "First part. [pause:0.5s] Second part."
    path, _, captions = client.predict(text, "English", "", "int4", **FIXED, api_name="/synthesize")
    assert captions.endswith(".srt")
    cues = list(srt.parse(Path(captions).read_text(encoding="utf-8")))
    cache = {k: v for k, v in PRESETS["balanced"].items() if k != "num_step"}
    settings = {k: v for k, v in FIXED.items() if k != "randomize_seed"}
    expected = OmniVoiceONNX.load(cpu_artifacts, "int4").generate(
        text, language="English", **settings, **cache
    )
    assert [cue.content for cue in cues] == ["First part.", "Second part."]
    for cue, caption in zip(cues, expected.captions, strict=True):
        assert cue.start.total_seconds() == pytest.approx(caption.start, abs=1e-3)
        assert cue.end.total_seconds() == pytest.approx(caption.end, abs=1e-3)
    assert cues[1].start.total_seconds() - cues[0].end.total_seconds() >= 0.5
    assert read(path)[0].shape == expected.waveform.shape


def test_the_api_dubs_a_subtitle_file_as_the_library_does(client, cpu_artifacts, tmp_path):
    """/dub (the page's Dubbing tab): the track is ``dubbing.dub``'s for the same cues and
    settings (the door's preset and its numbers read as words), its captions placed at the cues'
    times, the report its cues; built-in voices speak "Name:" cues; bad files and a cue that
    cannot fit are one line each."""
    srt = pytest.importorskip("srt")
    from omnivoice_rt.dubbing import dub
    from omnivoice_rt.model import OmniVoiceONNX
    from omnivoice_rt.request import door_request
    from omnivoice_rt.text import subtitles

    film = tmp_path / "film.srt"
    film.write_text(
        "1\n00:00:00,500 --> 00:00:02,000\nGood evening.\n\n"
        "2\n00:00:02,500 --> 00:00:04,500\nHere are 2 stories.\n",
        encoding="utf-8",
    )
    settings = {k: v for k, v in FIXED.items() if k != "duration"}
    path, info, placed, report, lines = client.predict(
        handle_file(str(film)), "English", "female", "", "int4", **settings, api_name="/dub"
    )
    assert "2 cues in 4.50 s of track" in info and "int4" in info and "seed 3" in info
    voice = OmniVoiceONNX.load(cpu_artifacts, "int4")
    options = {k: v for k, v in settings.items() if k != "randomize_seed"}
    expected = dub(
        voice,
        subtitles.read(film),
        {**options, "language": "English", "instruct": "female"},
        request_of=door_request,
    )
    audio, rate = read(path)
    assert rate == 24000 and len(audio) == round(4.5 * rate)
    np.testing.assert_allclose(audio, expected.waveform, atol=1e-4)
    cues = list(srt.parse(Path(placed).read_text(encoding="utf-8")))
    assert [c.start.total_seconds() for c in cues] == [0.5, 2.5]
    assert [c.content for c in cues] == ["Good evening.", "Here are 2 stories."]  # as written
    assert json.loads(Path(report).read_text())["cues"] == expected.report["cues"]
    assert "`0:00.50-" in lines and "`0:02.50-" in lines and "Here are 2 stories" in lines
    # words=True: each cue's words placed within the window it was placed at (WebVTT)
    _, _, placed, _, lines = client.predict(
        handle_file(str(film)), "English", "female", "", "int4", **settings, words=True,
        api_name="/dub",
    )  # fmt: skip
    webvtt = pytest.importorskip("webvtt", reason="webvtt-py (dev extra)")
    cues = list(webvtt.read(placed))
    assert [re.sub(r"<[^>]+>", "", c.raw_text).split() for c in cues] == [
        ["Good", "evening."],
        ["Here", "are", "2", "stories."],
    ]
    for cue in cues:  # webvtt-py's start_in_seconds is whole seconds: the clock's own text
        start, end = (float(clock.rpartition(":")[2]) for clock in (cue.start, cue.end))
        found = [float(t) for t in re.findall(r"<00:00:([\d.]+)>", cue.raw_text)]
        assert found and all(start <= t < end for t in found), (start, end, cue.raw_text)
    assert lines.count('<span class="word"') == 6

    film.write_text(
        "1\n00:00:00,500 --> 00:00:02,000\nalloy: Good evening.\n\n"
        "2\n00:00:02,500 --> 00:00:04,500\nHere are 2 stories.\n",
        encoding="utf-8",
    )
    _, info, placed, report, _ = client.predict(
        handle_file(str(film)), "English", "", "", **settings, speakers=True, api_name="/dub"
    )
    assert [e["speaker"] for e in json.loads(Path(report).read_text())["cues"]] == ["alloy", None]
    # the placed captions name the speaker, as the subtitle file did
    assert list(srt.parse(Path(placed).read_text()))[0].content == "alloy: Good evening."

    tight = tmp_path / "tight.srt"
    tight.write_text("1\n00:00:00,000 --> 00:00:00,300\nFar too much to say in no time.\n")
    with pytest.raises(Exception, match="cue 1 needs"):
        client.predict(handle_file(str(tight)), api_name="/dub")
    bad = tmp_path / "bad.srt"
    bad.write_text("1\nnot a time\nhi\n")
    with pytest.raises(Exception, match=r"cue 1 \(line 2\)"):
        client.predict(handle_file(str(bad)), api_name="/dub")
    film.write_text("1\n00:00:00,500 --> 00:00:02,000\nBob: Hi.\n")
    with pytest.raises(Exception, match="no voice 'Bob'.*alloy"):
        client.predict(handle_file(str(film)), speakers=True, api_name="/dub")
    many = tmp_path / "many.srt"
    many.write_text(
        "".join(
            f"{n}\n00:{n // 60:02d}:{n % 60:02d},000 --> 00:{n // 60:02d}:{n % 60:02d},500\nx\n\n"
            for n in range(1, 202)
        )
    )
    with pytest.raises(Exception, match="at most 200 cues"):
        client.predict(handle_file(str(many)), api_name="/dub")


def test_same_seed_same_audio_and_precisions_differ(client):
    first, _, _ = client.predict("Seeded.", "Auto", "", "int4", **FIXED, api_name="/synthesize")
    again, _, _ = client.predict("Seeded.", "Auto", "", "int4", **FIXED, api_name="/synthesize")
    fp16, info, _ = client.predict("Seeded.", "Auto", "", "fp16", **FIXED, api_name="/synthesize")
    np.testing.assert_array_equal(read(first)[0], read(again)[0])
    assert "fp16" in info and read(fp16)[0].shape == read(first)[0].shape
    assert np.abs(read(fp16)[0] - read(first)[0]).max() > 1e-3  # another model, another result


def test_clone_uploads_a_reference(client, reference):
    path, info, _ = client.predict(
        "Hello in my voice.",
        handle_file(reference),
        "This is my voice.",
        None,
        "Auto",
        "int4",
        **FIXED,
        api_name="/clone",
    )
    audio, rate = read(path)
    assert rate == 24000 and audio.shape[0] == 2 * 24000 + 2 * 2400


def test_a_reference_is_transcribed_and_cloning_needs_no_typed_transcript(client, reference):
    assert client.predict(handle_file(reference), "English", api_name="/transcribe") == TRANSCRIPT
    typed, _, _ = client.predict(
        "Hello.",
        handle_file(reference),
        TRANSCRIPT,
        None,
        "Auto",
        "int4",
        **FIXED,
        api_name="/clone",
    )
    heard, _, _ = client.predict(
        "Hello.", handle_file(reference), "", None, "Auto", "int4", **FIXED, api_name="/clone"
    )
    np.testing.assert_array_equal(read(heard)[0], read(typed)[0])
    # The reference was encoded once: the same file and transcript again come from the prompt cache.
    again, info, _ = client.predict(
        "Hello.",
        handle_file(reference),
        TRANSCRIPT,
        None,
        "Auto",
        "int4",
        **FIXED,
        api_name="/clone",
    )
    assert "the reference's encoding was reused" in info
    np.testing.assert_array_equal(read(again)[0], read(typed)[0])


def test_saved_voice_prompt_clones_the_same_voice(client, reference):
    prompt = client.predict(
        handle_file(reference), "This is my voice.", "int4", api_name="/save_voice_prompt"
    )
    assert prompt.endswith(".npz")
    from_prompt, _, _ = client.predict(
        "Hello.", None, "", handle_file(prompt), "Auto", "int4", **FIXED, api_name="/clone"
    )
    from_audio, _, _ = client.predict(
        "Hello.",
        handle_file(reference),
        "This is my voice.",
        None,
        "Auto",
        "int4",
        **FIXED,
        api_name="/clone",
    )
    np.testing.assert_array_equal(read(from_prompt)[0], read(from_audio)[0])


def test_errors_are_clear_and_the_server_keeps_serving(client, tmp_path):
    with pytest.raises(Exception, match="text is empty"):
        client.predict("   ", "Auto", "", "int4", **FIXED, api_name="/synthesize")
    with pytest.raises(Exception, match="Unknown language"):
        client.predict("Hi.", "Klingonese", "", "int4", **FIXED, api_name="/synthesize")
    not_audio = tmp_path / "notes.wav"
    not_audio.write_text("a text file with a .wav name")
    with pytest.raises(Exception, match="could not read the reference audio"):
        client.predict(
            "Hi.",
            handle_file(str(not_audio)),
            "Hi.",
            None,
            "Auto",
            "int4",
            **FIXED,
            api_name="/clone",
        )
    with pytest.raises(Exception, match="reference voice"):
        client.predict("Hi.", None, "", None, "Auto", "int4", **FIXED, api_name="/clone")
    path, _, _ = client.predict("Still here.", "Auto", "", "int4", **FIXED, api_name="/synthesize")
    assert read(path)[1] == 24000


def test_precision_line_tells_what_is_on_disk(cpu_artifacts, published_int4, tmp_path):
    from omnivoice_rt.server.models import availability
    from omnivoice_rt.server.page import precision_line
    from omnivoice_rt.server.serving import Config, Service

    service = Service(Config(str(cpu_artifacts), "int4"))
    line = precision_line(service, "fp16")
    assert "On disk:" in line and "LLM int4 (block 32), encoder fp16, heads fp16" in line, line
    assert "no fp32 profile" in precision_line(service, "fp32")
    service.models.get("int4")
    line = precision_line(service, "int4")
    assert "Loaded," in line and "LLM int4 (block 32), encoder int4 (block 32), heads fp32" in line
    # OMNIVOICE_MATMUL, conftest
    assert "Its LLM multiplies with fp32, MatMulNBits, weights dequantized" in line
    assert "(asked for)." in line
    assert "Not downloaded yet from test/none" in availability("test/none", "int4")
    # What the graphs hold, not what our own builds of a profile hold: the published int4 heads.
    published = Service(Config(str(published_int4), "int4"))
    assert "heads int4 (block 128)" in precision_line(published, "int4")
    # Not asked for a precision: int4 where its heads are not int4, else fp16, saying why.
    ours = Service(Config(str(cpu_artifacts)))
    assert (ours.models.default, ours.models.default_reason) == ("int4", "the fastest")
    assert "The server's default: the fastest." in precision_line(ours, "int4")
    published = Service(Config(str(published_int4)))
    assert published.models.default == "fp16"
    assert published.models.default_reason.startswith("int4's heads are int4 (block 128)")


def test_the_app_says_why_it_cannot_transcribe_and_clones_with_a_typed_transcript(
    cpu_artifacts, tiny_whisper, tmp_path
):
    reference = write_reference(str(tmp_path / "reference.wav"))
    broken = tmp_path / "broken"
    shutil.copytree(tiny_whisper, broken)
    (broken / "onnx" / "encoder_model_int8.onnx").write_bytes(b"not a graph")
    args = ["--artifacts", str(cpu_artifacts), "--asr-model", str(broken)]
    with running_app(args, tmp_path / "server.log", HF_HUB_OFFLINE="1") as url:
        client = Client(url, verbose=False)
        with pytest.raises(Exception, match="could not be loaded.*give the transcript") as caught:
            client.predict(handle_file(reference), "Auto", api_name="/transcribe")
        assert "Traceback" not in str(caught.value)
        settings = dict(
            num_step=4,
            guidance=2.0,
            speed=1.0,
            duration=1.0,
            seed=0,
            randomize_seed=False,
            denoise=True,
            postprocess=False,
        )
        with pytest.raises(Exception, match="could not be loaded"):
            client.predict(
                "Hi.",
                handle_file(reference),
                "",
                None,
                "Auto",
                "int4",
                **settings,
                api_name="/clone",
            )
        path, info, _ = client.predict(
            "Hi.",
            handle_file(reference),
            TRANSCRIPT,
            None,
            "Auto",
            "int4",
            **settings,
            api_name="/clone",
        )
        assert "s of audio" in info and Path(path).is_file()
