#!/bin/sh
# Runs one pipeline file under gst-launch-1.0 with test sources in place of the app elements:
# the same topology media-core launches, minus the application.
#
#   pipelines/try.sh NAME [gst-launch-1.0 options]        e.g. pipelines/try.sh h264-x264 -v
#
# Placeholders come from the environment (defaults in brackets): WIDTH [512] HEIGHT [512]
# FPS [25] KEYINT [50] JPEG_QUALITY [80] BITRATE_KBPS [1000]. DURATION_S [5] sets the length.
# SINK replaces `appsink name=sink` [fakesink sync=false]; e.g.
#   SINK='filesink location=/tmp/out.h264' pipelines/try.sh h264-x264
#   SINK='rtpvp8depay ! vp8dec ! videoconvert ! autovideosink' pipelines/try.sh vp8
set -eu
name=${1:?usage: try.sh NAME [gst-launch options]}
shift
dir=$(dirname "$0")
file="$dir/$name.pipeline"
[ -f "$file" ] || { echo "no such pipeline: $file" >&2; exit 2; }
: "${WIDTH:=512}" "${HEIGHT:=512}" "${FPS:=25}" "${KEYINT:=50}" "${JPEG_QUALITY:=80}" "${BITRATE_KBPS:=1000}"
: "${DURATION_S:=5}" "${SINK:=fakesink sync=false}"
if grep -q 'audio/x-raw' "$file"; then
  # 1/FPS s per buffer at 24 kHz, like the session's frame ticks.
  src="audiotestsrc is-live=true wave=sine freq=440 samplesperbuffer=$((24000 / FPS)) num-buffers=$((DURATION_S * FPS))"
else
  src="videotestsrc is-live=true pattern=ball num-buffers=$((DURATION_S * FPS))"
fi
desc=$(grep -v '^[[:space:]]*#' "$file" | tr '\n' ' ' | sed \
  -e "s/\${WIDTH}/$WIDTH/g" -e "s/\${HEIGHT}/$HEIGHT/g" -e "s/\${FPS}/$FPS/g" -e "s/\${KEYINT}/$KEYINT/g" \
  -e "s/\${JPEG_QUALITY}/$JPEG_QUALITY/g" -e "s/\${BITRATE_KBPS}/$BITRATE_KBPS/g" \
  -e "s|appsrc name=src|$src|" -e "s|appsink name=sink|$SINK|")
echo "gst-launch-1.0 $* $desc" >&2
# shellcheck disable=SC2086 # the description is split into words on purpose, as gst-launch expects
exec gst-launch-1.0 "$@" $desc
