/* Tooltips: an element with data-tip shows its text on hover (its title, for pages where no
   script runs, is removed while this runs). */
(function () {
  var here = document.currentScript;
  var root = here && here.parentNode ? here.parentNode : document;
  if (root.getAttribute && root.getAttribute("data-tips")) { return; }
  if (root.setAttribute) { root.setAttribute("data-tips", "1"); }
  // With the script running, its tooltip replaces the browser's (titles stay for pages without it).
  root.querySelectorAll("[data-tip]").forEach(function (el) {
    el.removeAttribute("title");
    Array.prototype.forEach.call(el.querySelectorAll("title"), function (t) { t.remove(); });
  });
  var tip = document.createElement("div");
  tip.className = "tooltip";
  tip.setAttribute("role", "tooltip");
  root.appendChild(tip);
  root.addEventListener("mousemove", function (event) {
    var target = event.target.closest ? event.target.closest("[data-tip]") : null;
    if (!target || !root.contains(target)) { tip.style.display = "none"; return; }
    tip.textContent = target.getAttribute("data-tip");
    tip.style.display = "block";
    tip.style.left = (event.clientX + 12) + "px";
    tip.style.top = (event.clientY + 12) + "px";
  });
  root.addEventListener("mouseleave", function () { tip.style.display = "none"; });
})();
