"""The mini corpus: a small synthetic LibriSpeech-layout corpus that trains in minutes (`corpus`), its sentences
(`grammar`), speakers (`voices`), speech (`synthesis` with the `tts_espeak` and `tts_piper` engines) and rooms and
noise (`acoustics`). See docs/data.md, "The mini corpus"."""
