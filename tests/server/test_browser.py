"""The Space in a real headless Chromium (Debian's ``chromium``, driven by Playwright).

Screenshots of each stage are saved under ``test-screenshots/`` at the repository root, so a
person can look at what the page showed.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from omnivoice_build.equivalence import write_reference
from tests.conftest import ROOT

SHOTS = ROOT / "test-screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One Chromium for the module (Playwright's sync API allows one at a time), whose microphone
    is a fake device fed from a wav of a speech-like signal."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(
            "Chromium is missing: apt-get install chromium (the README's test command does)"
        )
    SHOTS.mkdir(exist_ok=True)
    microphone = write_reference(
        str(tmp_path_factory.mktemp("mic") / "microphone.wav"), seconds=4.0, rate=48000, channels=1
    )
    fake_microphone = [
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={microphone}",
    ]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS + fake_microphone)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def page(browser, app_server):
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    page.goto(app_server, wait_until="networkidle")
    # the waits below ask for elements a predicate may find missing while Gradio still renders
    return page


def wait_for_result(page, previous: str, precision: str, timeout: float = 120_000) -> str:
    """Wait for a new result line made with ``precision``, and an audio player holding audio."""
    page.wait_for_function(
        """([prev, precision]) => {
             const el = document.querySelector('#result-info');
             if (!el) return false;
             const line = el.innerText.trim().split('\\n').find(l => /^[0-9.]+ s of audio/.test(l));
             return line !== undefined && line.includes(precision) && line !== prev; }""",
        arg=[previous, precision],
        timeout=timeout,
    )
    page.wait_for_selector("#result-audio audio[src]", state="attached", timeout=timeout)
    return result_line(page)


def result_line(page) -> str:
    lines = page.inner_text("#result-info").strip().split("\n")
    return next((line for line in lines if re.match(r"[0-9.]+ s of audio", line)), lines[-1])


def test_the_page_says_when_the_default_precision_is_ready(page):
    """The server loads int4 as it starts; the precision line follows that load without a click."""
    page.wait_for_function(
        "() => (document.querySelector('#precision-info')?.innerText || '').includes('Loaded,')",
        timeout=120_000,
    )
    assert "ready" in page.inner_text("#precision-info")
    labels = page.locator("#precision label").all_inner_texts()
    # the folder's profiles, no cuda
    assert [label.strip() for label in labels] == ["int4", "int8", "fp16"]
    page.screenshot(path=str(SHOTS / "0-ready.png"), full_page=True)


def test_generate_switch_precision_and_clone(page, tmp_path):
    page.fill("#tts-text textarea", "Hello from a real browser.")
    page.get_by_role("button", name="[laughter]").click()
    page.wait_for_function(
        "() => (document.querySelector('#tts-text textarea')?.value || '').endsWith('[laughter]')",
        timeout=10_000,
    )
    assert page.input_value("#tts-text textarea") == "Hello from a real browser.[laughter]"
    page.click("#tts-generate")
    info = wait_for_result(page, "", "int4")
    page.screenshot(path=str(SHOTS / "1-text-to-speech.png"), full_page=True)

    page.get_by_label("fp16").check()
    page.click("#tts-generate")
    info = wait_for_result(page, info, "fp16")
    page.screenshot(path=str(SHOTS / "2-fp16.png"), full_page=True)

    reference = write_reference(str(tmp_path / "my-voice.wav"))
    page.get_by_role("tab", name="Voice cloning").click()
    page.locator("#ref-audio").get_by_label("Upload file").click()
    page.locator("#ref-audio input[type=file]").set_input_files(reference)
    page.wait_for_selector("#ref-audio audio[src]", state="attached", timeout=30_000)
    # The upload is transcribed into the (editable) transcript box.
    page.wait_for_function(
        "() => document.querySelector('#ref-text textarea')?.value === 'This is my voice.'",
        timeout=60_000,
    )
    page.fill("#clone-text textarea", "And this is me, cloned.")
    page.click("#clone-generate")
    info = wait_for_result(page, info, "fp16")
    assert "s of audio" in info
    page.screenshot(path=str(SHOTS / "3-voice-cloning.png"), full_page=True)


def test_sentence_by_sentence_plays_the_first_piece_while_the_rest_is_made(page):
    """The page's player gets the first piece before the last is made, and the whole result
    arrives as a wav at the end (ffmpeg encodes the stream: packages.txt, .ci/run)."""
    if not shutil.which("ffmpeg"):
        pytest.fail("ffmpeg is missing: apt-get install ffmpeg (the README's test command does)")
    page.get_by_role("tab", name="Text to speech").click()
    page.get_by_label("int4").check()
    page.fill(
        "#tts-text textarea",
        "The first sentence is here. Then a second one follows it. And a third one ends it.",
    )
    page.locator("#sentences input").check()
    info = page.inner_text("#result-info").strip().split("\n")[-1]
    page.evaluate("""() => {
        window.seen = [];
        const note = () => window.seen.push(document.querySelector('#result-info').innerText.trim());
        new MutationObserver(note).observe(document.querySelector('#result-info'),
                                           {childList: true, subtree: true, characterData: true}); }""")
    page.click("#tts-generate")
    wait_for_result(page, info, "int4")
    seen = page.evaluate("window.seen")
    assert any(line.startswith("Playing piece 1 of ") for line in seen), seen
    assert page.locator("#result-stream audio").count() == 1  # the streamed pieces, still playable
    page.screenshot(path=str(SHOTS / "4-sentences.png"), full_page=True)
    page.locator("#sentences input").uncheck()


def test_numbers_are_read_as_words_and_the_page_shows_what_was_read(page):
    page.get_by_role("tab", name="Text to speech").click()
    box = page.locator("#normalize-text input")
    assert box.is_visible() and box.is_checked()  # on by default, outside the settings
    page.fill("#tts-text textarea", "It costs $5 on May 3.")
    page.click("#tts-generate")
    info = wait_for_result(page, result_line(page), "int4")
    assert "numbers and dates read as words" in info
    shown = page.inner_text("#result-info")
    assert "Read as: It costs five dollars on May three." in shown, shown
    page.screenshot(path=str(SHOTS / "4b-read-as-words.png"), full_page=True)
    box.uncheck()
    page.click("#tts-generate")
    info = wait_for_result(page, info, "int4")
    assert "read as words" not in info and "Read as" not in page.inner_text("#result-info")
    box.check()


def test_word_timings_highlight_the_word_the_player_is_at(page):
    """ "Word timings": the lines under the player hold each word with its place; seeking either
    player (the streamed pieces', Gradio's waveform player of the whole result) to a time
    highlights the word whose span holds it, and the captions are WebVTT."""
    try:  # the box unchecked whatever happens: the next tests' captions are SRT
        page.get_by_role("tab", name="Text to speech").click()
        page.locator("#words input").check()
        page.fill("#tts-text textarea", "Hello there, my good friend. [pause:0.5s] See you soon.")
        page.click("#tts-generate")
        wait_for_result(page, result_line(page), "int4")
        page.wait_for_selector("#result-lines span.word[title]", timeout=60_000)
        words = page.evaluate(
            """() => [...document.querySelectorAll('#result-lines span.word')].map(s => [
                 s.innerText, ...(s.title ? s.title.split('-').map(parseFloat) : [null, null])])"""
        )
        assert [w[0] for w in words] == [
            "Hello",
            "there,",
            "my",
            "good",
            "friend.",
            "See",
            "you",
            "soon.",
        ]
        placed = [w for w in words if w[1] is not None and w[2] > w[1]]
        assert len(placed) >= 4
        # the player holding the result (the streamed pieces' plays it all)
        player = """() => [...document.querySelectorAll('#result-audio audio, #result-stream audio')]
                      .filter(a => a.currentSrc)[0]"""
        for text, start, end in (placed[1], placed[-1]):
            # its pieces come over a live playlist: a seek past what it holds stops short
            page.wait_for_function(
                f"""t => {{ const p = ({player})();
                    return p && p.buffered.length && p.buffered.end(p.buffered.length - 1) > t; }}""",
                arg=(start + end) / 2,
                timeout=30_000,
            )
            page.evaluate(  # paused: playing on, it would leave the word before it is counted
                f"t => {{ const p = ({player})(); p.pause(); p.currentTime = t; }}",
                (start + end) / 2,
            )
            page.wait_for_function(
                "w => document.querySelector('#result-lines span.word.spoken')?.innerText === w",
                arg=text,
                timeout=10_000,
            )
            assert page.locator("#result-lines span.word.spoken").count() == 1
        # Gradio's waveform player of the whole result, whose media element is in a shadow root
        # (Playwright's CSS reaches into it): played, paused, then moved to a word
        page.evaluate(
            "() => document.querySelectorAll('#result-stream audio').forEach(a => a.pause())"
        )
        page.locator("#result-audio button[aria-label='Play']").click()
        page.locator("#result-audio button[aria-label='Pause']").click()
        waveform = page.locator("#result-audio #waveform audio")
        for text, start, end in (placed[2], placed[-2]):
            waveform.evaluate("(player, t) => { player.currentTime = t; }", (start + end) / 2)
            page.wait_for_function(
                "w => document.querySelector('#result-lines span.word.spoken')?.innerText === w",
                arg=text,
                timeout=10_000,
            )
        link = page.locator("#result-captions a").first
        link.wait_for(timeout=30_000)
        assert ".vtt" in (link.get_attribute("href") or "")
        page.screenshot(path=str(SHOTS / "4d-word-timings.png"), full_page=True)
    finally:
        page.locator("#words input").uncheck()


def test_the_captions_show_under_the_player_and_download_as_srt(page):
    """A text with a pause: one line per piece under the player, with its times, and the .srt
    file to download (its cues those times)."""
    page.get_by_role("tab", name="Text to speech").click()
    page.fill("#tts-text textarea", "One piece here. [pause:1s] Another piece there.")
    page.click("#tts-generate")
    wait_for_result(page, result_line(page), "int4")
    page.wait_for_function(
        "() => (document.querySelector('#result-lines')?.innerText || '').includes('Another')",
        timeout=30_000,
    )
    shown = [line for line in page.inner_text("#result-lines").strip().split("\n") if line]
    assert len(shown) == 2 and shown[0].endswith("One piece here.") and "[pause" not in shown[1]
    times = [re.match(r"(\d+):([\d.]+)-(\d+):([\d.]+)", line).groups() for line in shown]
    (_, end_first), (start_second, _) = [
        (int(a) * 60 + float(b), int(c) * 60 + float(d)) for a, b, c, d in times
    ]
    assert start_second - end_first >= 1.0 - 0.01  # the pause, between the pieces
    link = page.locator("#result-captions a").first
    link.wait_for(timeout=30_000)
    assert ".srt" in (link.get_attribute("href") or "")
    page.screenshot(path=str(SHOTS / "4c-captions.png"), full_page=True)
    # "Keep this voice": the result's voice as a prompt file (this server's library is read-only)
    page.click("#keep-voice")
    kept = page.locator("#kept-voice a").first
    kept.wait_for(timeout=30_000)
    assert ".npz" in (kept.get_attribute("href") or "")
    assert "load it under Voice cloning" in page.inner_text("#keep-line")


def test_the_dubbing_tab_dubs_an_uploaded_subtitle_file(page, tmp_path):
    """Dubbing: an uploaded .srt is spoken cue by cue; the page says what was made, shows each
    cue's line at its subtitle time and offers the track, its captions and the report."""
    film = tmp_path / "film.srt"
    film.write_text(
        "1\n00:00:00,500 --> 00:00:02,000\nGood evening.\n\n"
        "2\n00:00:02,500 --> 00:00:04,500\nThe lights are on.\n",
        encoding="utf-8",
    )
    page.get_by_role("tab", name="Dubbing").click()
    page.locator("#dub-subtitles input[type=file]").set_input_files(str(film))
    page.wait_for_function(
        "() => (document.querySelector('#dub-subtitles')?.innerText || '').includes('film')",
        timeout=30_000,
    )
    page.click("#dub-generate")
    page.wait_for_function(
        "() => /2 cues in 4.50 s of track/.test(document.querySelector('#result-info')?.innerText || '')",
        timeout=120_000,
    )
    shown = [line for line in page.inner_text("#result-lines").strip().split("\n") if line]
    assert shown[0].startswith("0:00.50-") and shown[0].endswith("Good evening.")
    assert shown[1].startswith("0:02.50-") and shown[1].endswith("The lights are on.")
    page.wait_for_selector("#result-audio audio[src]", state="attached", timeout=30_000)
    for element, suffix in (("#dub-report", ".json"), ("#result-captions", ".srt")):
        link = page.locator(f"{element} a").first
        link.wait_for(timeout=30_000)
        assert suffix in (link.get_attribute("href") or "")
    page.screenshot(path=str(SHOTS / "4d-dubbing.png"), full_page=True)


def test_the_script_tab_fills_the_speakers_and_speaks_each_in_its_voice(page):
    """Script: typing a dialogue lists its names in the speakers' table, a row each (a name the
    library has speaks in that voice; a design is typed into another's Voice cell); the result's
    lines name each turn's speaker."""
    page.get_by_role("tab", name="Script").click()
    page.locator("#script-text textarea").fill("alloy: Good evening.\nMaría：Buenas noches.")
    cell = "#script-table [data-testid=cell-{}-{}]".format
    page.wait_for_selector(cell(1, 0), timeout=30_000)
    assert [page.inner_text(cell(row, 0)).strip() for row in (0, 1)] == ["alloy", "María"]
    page.locator(cell(1, 1)).dblclick()  # the table's cell, as a visitor edits it
    page.keyboard.type("female, low pitch")
    page.keyboard.press("Enter")
    page.wait_for_function(  # what /script is given: the table as NAME=VOICE lines
        "() => (document.querySelector('#script-speakers textarea')?.value || '')"
        " === 'alloy=\\nMaría=female, low pitch'",
        timeout=30_000,
    )
    page.click("#script-generate")
    page.wait_for_function(
        "() => /2 turns of 2 speakers/.test(document.querySelector('#result-info')?.innerText || '')",
        timeout=120_000,
    )
    shown = [line for line in page.inner_text("#result-lines").strip().split("\n") if line]
    assert shown[0].endswith("alloy: Good evening.") and shown[1].endswith("María: Buenas noches.")
    page.wait_for_selector("#result-audio audio[src]", state="attached", timeout=30_000)
    page.screenshot(path=str(SHOTS / "4e-script.png"), full_page=True)


def test_an_error_reaches_the_user(page):
    page.get_by_role("tab", name="Text to speech").click()
    page.fill("#tts-text textarea", "   ")
    page.click("#tts-generate")
    toast = page.get_by_text("text is empty", exact=False).first
    toast.wait_for(timeout=30_000)
    page.screenshot(path=str(SHOTS / "5-error.png"), full_page=True)


def test_a_first_visit_generates_the_default_text_then_clones_a_recorded_voice(browser, app_server):
    """A fresh page: Generate on the sentence the text box starts with, then record a reference
    from the microphone (Chromium's fake device, fed from a wav), see its transcript appear, clone."""
    from tests.conftest import TRANSCRIPT

    with browser.new_context(
        viewport={"width": 1280, "height": 1400}, permissions=["microphone"]
    ) as context:
        page = context.new_page()
        page.goto(app_server, wait_until="networkidle")
        assert page.input_value("#tts-text textarea").startswith("Hello! This is OmniVoice")
        page.click("#tts-generate")
        wait_for_result(page, "", "int4")
        page.screenshot(path=str(SHOTS / "6-first-visit.png"), full_page=True)

        page.get_by_role("tab", name="Voice cloning").click()
        page.locator("#ref-audio").get_by_label("Record audio").click()
        page.locator("#ref-audio").get_by_role("button", name="Record", exact=True).click()
        page.wait_for_timeout(3000)
        page.locator("#ref-audio").get_by_role("button", name="Stop", exact=True).click()
        page.wait_for_function(
            f"() => document.querySelector('#ref-text textarea')?.value === {TRANSCRIPT!r}",
            timeout=60_000,
        )
        page.fill("#clone-text textarea", "And this is me, recorded and cloned.")
        info = page.inner_text("#result-info").strip().split("\n")[-1]
        page.click("#clone-generate")
        wait_for_result(page, info, "int4")
        page.screenshot(path=str(SHOTS / "7-recorded-clone.png"), full_page=True)


def test_an_example_fills_its_controls_and_plays(page):
    page.get_by_role("tab", name="Text to speech").click()
    page.get_by_label("int4").check()
    info = page.inner_text("#result-info").strip().split("\n")[-1]
    page.locator("#examples").get_by_text("The weather is lovely today", exact=False).click()
    wait_for_result(page, info, "int4")
    assert page.input_value("#tts-text textarea").startswith("The weather is lovely today")
    # the voice design's free text, and the instruct sent to the model
    page.wait_for_function(
        "() => [...document.querySelectorAll('textarea')].some(t => t.value === 'female, young adult')",
        timeout=10_000,
    )
    page.screenshot(path=str(SHOTS / "8-example.png"), full_page=True)


@pytest.mark.parametrize("width", [1280, 390])
def test_the_layout_at_a_desktop_and_a_phone_width(browser, app_server, width):
    """The tag buttons keep their labels on one line, the voice design is one box, the examples
    belong to the first tab, and the cloning tab offers a style and the library's voices."""
    page = browser.new_page(viewport={"width": width, "height": 1400})
    try:
        page.goto(app_server, wait_until="networkidle")
        button = page.get_by_role("button", name="[dissatisfaction-hnn]")
        line = page.evaluate(
            "b => parseFloat(getComputedStyle(b).lineHeight) || 20", button.element_handle()
        )
        assert button.bounding_box()["height"] < 2 * line + 12  # one line of text, and padding
        assert page.locator("#tts-instruct textarea").count() == 1  # typed, or composed above
        assert page.get_by_label("Or describe it yourself").count() == 0
        page.screenshot(path=str(SHOTS / f"9-layout-tts-{width}.png"), full_page=True)
        page.get_by_role("tab", name="Voice cloning").click()
        page.wait_for_selector("#clone-instruct textarea", timeout=10_000)
        assert page.locator("#library-voice").is_visible()
        assert not page.locator("#examples").is_visible()  # they fill the first tab's fields
        assert not page.locator("#library-save").is_visible()  # a read-only library here
        page.screenshot(path=str(SHOTS / f"9-layout-clone-{width}.png"), full_page=True)
    finally:
        page.close()


def test_the_page_says_when_it_waits_for_its_visitors_own_requests(browser, app_server):
    """A visitor (X-Forwarded-For, as a proxy on this machine reports it) whose two texts are
    under way clicks Generate: the page waits although two slots are free, says why, then
    plays its result."""
    from tests.server.test_clients import A, Speaking, health, wait_for

    headers = {"X-Forwarded-For": A}
    with browser.new_context(
        viewport={"width": 1280, "height": 1400}, extra_http_headers=headers
    ) as context:
        page = context.new_page()
        page.goto(app_server, wait_until="networkidle")
        page.get_by_role("tab", name="Text to speech").click()
        page.fill("#tts-text textarea", "Hi there.")
        speaking = Speaking(app_server)
        for n in range(2):
            speaking.send(f"a{n}", A)
        wait_for(lambda: health(app_server)["serving"] == 2)
        page.click("#tts-generate")
        page.wait_for_function(
            "() => document.body.innerText.includes('Waiting for your own requests')",
            timeout=60_000,
        )
        assert (health(app_server)["serving"], health(app_server)["waiting"]) == (2, 1)
        wait_for_result(page, "", "int4")
        speaking.join()
