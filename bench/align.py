#!/usr/bin/env python3
"""How well the word aligner (``omnivoice_rt.align``) finds words, on speech that does not match
its template, in several languages of different scripts.

    python bench/align.py [--languages en,ru,el,hi,cmn,ar] [--seeds 8] [--texts main,held]

The speech: eSpeak NG (its ``+f3`` voice at pitch 70; the aligner's template is the language's
own voice at 50) speaks each text with every word at its own random rate (SSML ``<prosody
rate>``, 70% to 150%), a pause of 100 to 350 ms after a random quarter of the words, and white
noise at 20 dB SNR (to the power of the speech's non-silent samples). Each word's true start is
where its sound starts: eSpeak's mark before it, moved past any silence at it (eSpeak puts a
clause's pause after the next word's mark) to the first 5 ms over -35 dB of the loudest, on the
clean rendering; a word eSpeak read as one with the word before it (two characters of one
Chinese word) has its mark where that word ends and no sound of its own (under 20 ms before the
next word's mark), so no true start, and is left out.
Speech at one even rate proves nothing: there plain MFCC warping is within
21 ms on average.

Prints, per language: the mean and 95th percentile of the start error over every placed word of
every seed, how many words the aligner left unplaced (None), and the aligner's time per second of audio; then one machine line (``mean_ms_{lang}=``,
``p95_ms_{lang}=``, ``ms_per_s=``) with the CPU's name and flags. Targets (issue 53): mean at
most 50 ms and p95 at most 150 ms in every language; time under 5% of the synthesis time.

Extras: align (eSpeak NG).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.benchmark import machine  # noqa: E402
from omnivoice_rt.align import align, espeak, words_of  # noqa: E402

TEXTS = {  # (main, held out): the aligner was tuned on the first, checked on the second
    "en": (
        "The old lighthouse keeper climbed the narrow stairs every evening, checked the great "
        "lamp, wrote a few lines in his logbook, and watched the ships pass slowly along the "
        "rocky coast until the morning came.",
        "When the rain finally stopped, the children ran outside with their boots and "
        "umbrellas, jumping into every puddle they could find while their parents laughed from "
        "the porch.",
    ),
    "ru": (
        "Каждое утро старый рыбак выходил в море на своей маленькой лодке, проверял сети, "
        "разговаривал с чайками и возвращался домой только тогда, когда солнце садилось за холмы.",
        "Вечером мы долго сидели у костра, слушали старые истории и смотрели, как над лесом "
        "медленно поднимается огромная жёлтая луна.",
    ),
    "el": (
        "Κάθε πρωί η γιαγιά μου άνοιγε το παράθυρο της κουζίνας, έφτιαχνε καφέ για όλη την "
        "οικογένεια και τραγουδούσε παλιά τραγούδια από το χωριό της.",
        "Το καλοκαίρι πηγαίναμε κάθε μέρα στη θάλασσα, κολυμπούσαμε μέχρι το μεσημέρι και "
        "τρώγαμε ψάρι σε μια μικρή ταβέρνα δίπλα στο λιμάνι.",
    ),
    "hi": (
        "हर सुबह मेरे दादाजी बगीचे में टहलने जाते थे, फूलों को पानी देते थे और पक्षियों के लिए दाना "
        "डालते थे, फिर चाय पीते हुए अखबार पढ़ते थे।",
        "बारिश के मौसम में गाँव की सड़कें कीचड़ से भर जाती हैं, लेकिन बच्चे फिर भी खुशी से खेलते हैं "
        "और कागज़ की नावें चलाते हैं।",
    ),
    "cmn": (
        "每天早上我的奶奶都会去公园散步，她喜欢看孩子们放风筝，也喜欢和老朋友们一起聊天喝茶。",
        "昨天晚上我们一家人在饭店吃饭，服务员很热情，菜也非常好吃，大家都聊得很开心。",
    ),
    "ar": (
        "في كل صباح يذهب جدي إلى السوق القديم ليشتري الخبز والفاكهة ثم يجلس مع أصدقائه في "
        "المقهى ويتحدثون عن الأيام الماضية.",
        "في المساء يجتمع الأطفال في الحديقة ليلعبوا بالكرة بينما تجلس الأمهات على المقاعد "
        "ويتحدثن عن المدرسة والعمل.",
    ),
}
VARIANT, PITCH = "+f3", 70  # the speaker of the test speech (the template's: the voice's own, 50)
SNR_DB = 20.0


def onsets(samples: np.ndarray, rate: int, marks: np.ndarray, db: float = 35.0) -> np.ndarray:
    """Each mark moved past the silence at it to the first 5 ms over -``db`` of the loudest."""
    hop = int(0.005 * rate)
    count = samples.size // hop
    power = (samples[: count * hop].reshape(count, hop) ** 2).mean(1)
    sound = power > power.max() * 10 ** (-db / 10)
    starts = []
    for mark in marks:
        if not np.isfinite(mark):  # eSpeak gave the word no mark: no start to find
            starts.append(np.nan)
            continue
        k = int(mark * rate) // hop
        while k < count and not sound[k]:
            k += 1
        starts.append(max(mark, k * hop / rate))
    starts = np.array(starts)
    # a word with no sound of its own before the next one's mark was read as one with the word
    # before it: no boundary to find
    ends = np.r_[marks[1:], count * hop / rate]
    for k in range(len(ends) - 2, -1, -1):  # a word with no mark: the next one's mark ends it
        if not np.isfinite(ends[k]):
            ends[k] = ends[k + 1]
    for k, (start, end) in enumerate(zip(starts, ends, strict=True)):
        if (
            np.isfinite(start)
            and sound[int(start * rate) // hop : int(end * rate) // hop].sum() < 4
        ):
            starts[k] = np.nan
    return starts


def varied(
    words: list[str], voice: str, joiner: str, rng, speaker: str = VARIANT, pitch: int = PITCH
) -> tuple[np.ndarray, int, np.ndarray]:
    """Test speech of ``words`` (see the module's doc), its rate and each word's true start;
    ``speaker``: eSpeak's voice variant, at ``pitch``."""
    rates = rng.uniform(0.7, 1.5, len(words))
    pauses = np.where(rng.random(len(words)) < 0.25, rng.uniform(100, 350, len(words)), 0.0)
    pauses[-1] = 0.0
    spoken = espeak.engine().speak(
        words,
        voice + speaker,
        joiner=joiner,
        pitch=pitch,
        rates=list(rates),
        breaks_ms=list(pauses),
    )
    x = spoken.samples
    truth = onsets(x, spoken.sample_rate, spoken.starts)
    loud = np.abs(x) > 0.01 * np.abs(x).max()
    power = float((x[loud] ** 2).mean())
    noise = rng.normal(0.0, np.sqrt(power / 10 ** (SNR_DB / 10)), x.shape)
    return (x + noise).astype(np.float32), spoken.sample_rate, truth


def measure(language: str, text: str, seeds: int) -> tuple[np.ndarray, int, float, float]:
    """Every placed word's start error (seconds) over ``seeds`` renderings, how many words were
    left unplaced, the aligner's time and the audio's length."""
    words = words_of(text)
    joiner = "" if language == "cmn" else " "
    errors, unplaced, took, audio = [], 0, 0.0, 0.0
    for seed in range(seeds):
        x, rate, truth = varied(words, language, joiner, np.random.default_rng(seed))
        espeak.engine().forget()  # each rendering aligned against a template of its own
        started = time.perf_counter()
        found = align(x, rate, text, language)
        took += time.perf_counter() - started
        audio += x.size / rate
        starts = np.array([np.nan if w.start is None else w.start for w in found])
        known = np.isfinite(truth)
        placed = known & np.isfinite(starts)
        errors += list(np.abs(starts[placed] - truth[placed]))
        unplaced += int((known & ~placed).sum())
    return np.array(errors), unplaced, took, audio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--languages", default=",".join(TEXTS))
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--texts", default="main,held", help="main, held (out) or both")
    args = parser.parse_args()
    which = [("main", "held").index(t) for t in args.texts.split(",")]
    line, took, audio = [], 0.0, 0.0
    for language in args.languages.split(","):
        errors, lost = [], 0
        for index in which:
            e, u, t, a = measure(language, TEXTS[language][index], args.seeds)
            errors.append(e)
            lost, took, audio = lost + u, took + t, audio + a
        ms = np.concatenate(errors) * 1000
        mean, p95 = ms.mean(), np.percentile(ms, 95)
        print(
            f"{language:4} mean {mean:5.1f} ms  p95 {p95:6.1f} ms  ({ms.size} words, {lost} "
            "unplaced)",
            flush=True,
        )
        line += [f"mean_ms_{language}={mean:.1f}", f"p95_ms_{language}={p95:.1f}"]
        line += [f"unplaced_{language}={lost}"]
    print(f"aligner: {1000 * took / audio:.1f} ms per second of audio")
    print(" ".join([*line, f"ms_per_s={1000 * took / audio:.1f}", f"cpu='{machine()}'"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
