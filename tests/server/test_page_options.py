"""The page's options, declared once (``omnivoice_rt/server/page/options.py``): every parameter of
the page's API and MCP tools is a request option (``OPTIONS``) or one of the page's own
(``PAGE_ONLY``); each slider shows the range declared beside its option, within the option's
bound; the docstrings (the MCP tools' descriptions) quote those declarations; and the API takes
its parameters in the order it took them before the declaration."""

from __future__ import annotations

import inspect

import gradio as gr
import pytest
from gradio.utils import get_function_description

from omnivoice_rt.request import OPTIONS
from omnivoice_rt.server.page import options, settings
from omnivoice_rt.server.page.handlers import Handlers
from omnivoice_rt.server.serving import Config, Service
from omnivoice_rt.voices import VoiceLibrary

# The API's parameters as gradio_client took them before they were declared: positional callers
# depend on this order (sample_rate since issue 53, then words, last; /script is new).
TODAY = {
    "synthesize": "text language instruct precision num_step guidance_scale speed duration seed "
    "randomize_seed denoise postprocess_output preset normalize_text guidance postprocess "
    "sample_rate words",
    "clone": "text ref_audio ref_text voice_prompt language precision num_step guidance_scale "
    "speed duration seed randomize_seed denoise postprocess_output preset normalize_text "
    "instruct voice guidance postprocess sample_rate words",
    "dub": "subtitles_file language instruct voice precision num_step guidance_scale speed seed "
    "randomize_seed denoise postprocess_output preset normalize_text max_speed speakers "
    "sample_rate words",
    "script": "text speaker_voices voice language instruct precision num_step guidance_scale "
    "speed seed randomize_seed denoise postprocess_output preset normalize_text turn_pause "
    "sample_rate words",
}
PUBLIC = (
    "synthesize",
    "clone",
    "dub",
    "script",
    "save_voice_prompt",
    "save_to_library",
    "transcribe",
)


@pytest.fixture(scope="module")
def handlers(tmp_path_factory):
    """The handlers of a server whose models are never loaded (nothing here synthesizes)."""
    folder = tmp_path_factory.mktemp("no-artifacts")
    config = Config(str(folder), "int4", None, preload=False, asr_model="none")
    return Handlers(Service(config, ["int4"]), "int4", VoiceLibrary(), False)


def parameters(handler) -> list[str]:
    return [name for name in inspect.signature(handler).parameters if name != "progress"]


def test_every_parameter_of_the_api_is_an_option_or_the_pages_own(handlers):
    for endpoint in PUBLIC:
        for name in parameters(getattr(handlers, endpoint)):
            assert name in OPTIONS or name in options.PAGE_ONLY, (endpoint, name)


def test_the_api_takes_its_parameters_in_todays_order(handlers):
    for endpoint, names in TODAY.items():
        assert parameters(getattr(handlers, endpoint)) == names.split(), endpoint
        assert options.ENDPOINTS[endpoint] == tuple(names.split()), endpoint


def test_each_slider_shows_its_declared_range_within_the_options_bound():
    for name, option in OPTIONS.items():
        if option.control is None:
            continue
        low, high, step = option.control
        assert low < high and step > 0, name
        for value in (low, high):  # both ends are values the option accepts
            option.check(name, int(value) if option.kind == "whole" else float(value))
    with gr.Blocks():
        controls = settings.layout()
    sliders = {name: c for name, c in controls.items() if isinstance(c, gr.Slider)}
    assert set(sliders) == {name for name, o in OPTIONS.items() if o.control}, sliders
    for name, slider in sliders.items():
        assert (slider.minimum, slider.maximum, slider.step) == OPTIONS[name].control, name
    # the duration's box: up to the option's bound, 0 for none (estimated)
    assert controls["duration"].maximum == OPTIONS["duration"].high
    assert controls["duration"].minimum == 0 and OPTIONS["duration"].above == 0


def test_the_docstrings_quote_the_declarations(handlers):
    for endpoint in options.ENDPOINTS:
        summary, described, _ = get_function_description(getattr(handlers, endpoint))
        described.pop("progress", None)  # Gradio's own
        assert summary and list(described) == list(options.ENDPOINTS[endpoint]), endpoint
        for name, text in described.items():
            assert text == options.meaning(endpoint, name), (endpoint, name)
            control = OPTIONS[name].control if name in OPTIONS else None
            if control:
                assert f"{control[0]:g} to {control[1]:g}" in text, (endpoint, name, text)
            if name in OPTIONS and OPTIONS[name].control and OPTIONS[name].high:
                assert f"{OPTIONS[name].high:g}" in text, (endpoint, name, text)


def test_an_option_added_to_an_endpoint_reaches_the_request(handlers, monkeypatch):
    """docs/design.md's one edit: a name appended to ENDPOINTS is a parameter of the API, a
    hidden input of the page, and an option of the request the page makes."""
    from omnivoice_rt.server.page import build_demo, page_request

    monkeypatch.setitem(
        options.ENDPOINTS, "synthesize", (*options.ENDPOINTS["synthesize"], "t_shift")
    )
    folder = handlers.service.config.source
    demo = build_demo(Config(folder, "int4", None, preload=False, asr_model="none"))
    named = demo.get_api_info()["named_endpoints"]["/synthesize"]["parameters"]
    assert named[-1]["parameter_name"] == "t_shift" and named[-1]["parameter_has_default"]
    fields = {**dict(inspect.signature(handlers.synthesize).parameters), "text": "Hello."}
    fields = {k: (v.default if isinstance(v, inspect.Parameter) else v) for k, v in fields.items()}
    fields.pop("progress")
    request = page_request({**fields, "t_shift": 0.3}, handlers.service)
    assert request.options()["t_shift"] == 0.3
    with pytest.raises(gr.Error, match="t_shift must be"):  # and checked as every option is
        page_request({**fields, "t_shift": -1.0}, handlers.service)


def test_the_result_lines_show_each_caption_as_written_around_its_word_spans():
    """Under the player, a caption's words are spans in its own text: Chinese characters side
    by side, a word holding a space ("(aside) &") whole, unplaced words without a time."""
    from omnivoice_rt import captions
    from omnivoice_rt.align import Word
    from omnivoice_rt.server.page.shared import caption_lines

    said = [captions.Caption(0, 24000, 24000, "你好。", speaker="小明"),
            captions.Caption(24000, 48000, 24000, "an (aside) & more")]  # fmt: skip
    words = [Word("你", 0.0, 0.2), Word("好。", 0.2, 0.5), Word("an", 1.0, 1.2),
             Word("(aside)&", None, None), Word("more", 1.5, 1.9)]  # fmt: skip
    first, second = caption_lines(said, words).splitlines()
    assert '0.000-0.200 s">你</span><span class="word" title="0.200-0.500 s">好。</span>' in first
    assert '1.200 s">an</span> <span class="word">(aside) &amp;</span> <span' in second
