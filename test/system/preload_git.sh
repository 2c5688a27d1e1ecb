#!/bin/sh
# SPDX-License-Identifier: MIT
# preload_git.sh DIR - builds a small, deterministic git history in DIR/repo (fixed
# names and dates, so the commit ids are fixed) and prints what git says about it.
# test/system/preload runs it with and without libtide preloaded and compares the output.
set -eu
cd "$1"
export HOME="$1" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_PAGER=cat PAGER=cat
export GIT_AUTHOR_NAME='Tide Tester' GIT_AUTHOR_EMAIL='tide@example.org'
export GIT_COMMITTER_NAME='Tide Tester' GIT_COMMITTER_EMAIL='tide@example.org'
at() { # at DAY: the dates of the next commit
    GIT_AUTHOR_DATE="2024-01-${1}T12:00:00+0000"
    GIT_COMMITTER_DATE="$GIT_AUTHOR_DATE"
    export GIT_AUTHOR_DATE GIT_COMMITTER_DATE
}

git init -q -b main repo
cd repo
i=0
while [ $i -lt 6 ]; do
    mkdir -p "dir$((i % 3))"
    seq 1 $((3000 + i * 700)) | sed "s/^/line of commit $i: /" > "dir$((i % 3))/file$i.txt"
    if [ $i -gt 0 ]; then
        seq 1 400 | sed "s/\$/ changed in commit $i/" >> dir0/file0.txt
    fi
    git add -A
    at "1$i"
    git commit -q -m "commit $i"
    i=$((i + 1))
done
git checkout -q -b side HEAD~2
echo "work on the side" > side.txt
git add side.txt
at 20
git commit -q -m "side work"
git checkout -q main
at 21
git merge -q --no-edit side

echo "== log"
git log --format='%H %T %an %ad %s' --date=iso-strict
echo "== cat-file"
git cat-file -p HEAD
git cat-file -p HEAD~1
echo "== ls-tree"
git ls-tree -r HEAD
echo "== diff --stat"
git diff --stat HEAD~4 HEAD
echo "== show"
git show --stat --format='%H %s' HEAD~1
echo "== blame (tail)"
git blame -s dir0/file0.txt | tail -n 5
echo "== grep"
git grep -c "changed in commit" HEAD
echo "== gc, fsck"
git gc -q
git fsck --full --strict && echo "fsck ok"
echo "== objects after gc"
git rev-list --all --objects | sort
echo "== archive"
git archive --format=tar HEAD | cksum
