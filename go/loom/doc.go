package loom
